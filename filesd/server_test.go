package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testToken = "files-token-not-for-logs"

// fixture: a root with two volumes (data, other) and a folder outside the root
type fixture struct {
	t       *testing.T
	root    string
	outside string
	srv     *httptest.Server
	logs    *bytes.Buffer
}

func newFixture(t *testing.T, maxUpload int64) *fixture {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "volumes")
	outside := filepath.Join(base, "outside")
	for _, dir := range []string{filepath.Join(root, "data", "sub"), filepath.Join(root, "other"), outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "data", "hello.txt"), "hello, volume\n")
	write(t, filepath.Join(root, "other", "secret.txt"), "another volume's\n")
	write(t, filepath.Join(outside, "passwd"), "outside the root\n")
	logs := &bytes.Buffer{}
	h, err := newHandler(root, testToken, maxUpload, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.close() })
	return &fixture{t: t, root: root, outside: outside, srv: srv, logs: logs}
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// do sends a request with the token; params are the query's
func (f *fixture) do(method, endpoint string, params url.Values, body io.Reader, headers ...string) *http.Response {
	f.t.Helper()
	u := f.srv.URL + endpoint
	if params != nil {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func expect(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if code != "" {
		var answer struct{ Code, Detail string }
		if err := json.Unmarshal(body, &answer); err != nil || answer.Code != code {
			t.Fatalf("answer %s, want the code %q", body, code)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("an error as %q, not JSON", resp.Header.Get("Content-Type"))
		}
	}
}

func listing(t *testing.T, resp *http.Response) []entry {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var entries []entry
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestOnlyTheBearerTokenIsTrusted(t *testing.T) {
	f := newFixture(t, 0)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken, testToken, "Bearer " + testToken + "x"} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/volumes/data/files", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, resp, http.StatusUnauthorized, "unauthenticated")
		resp.Body.Close()
	}
	resp, err := f.srv.Client().Get(f.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, resp, http.StatusNoContent, "")
	if strings.Contains(f.logs.String(), testToken) {
		t.Fatal("the token is in the log")
	}
}

func TestList(t *testing.T) {
	f := newFixture(t, 0)
	write(t, filepath.Join(f.root, "data", uploadPrefix+"abc"), "half an upload")
	if err := os.Symlink("hello.txt", filepath.Join(f.root, "data", "link")); err != nil {
		t.Fatal(err)
	}
	entries := listing(t, f.do("GET", "/v1/volumes/data/files", nil, nil))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, ","); got != "sub:directory,hello.txt:file,link:link" {
		t.Fatalf("listed %s", got)
	}
	if entries[1].Size != 14 {
		t.Fatalf("size %d", entries[1].Size)
	}
	if _, err := time.Parse(time.RFC3339, entries[1].Modified); err != nil {
		t.Fatalf("modified %q: %v", entries[1].Modified, err)
	}
	if got := listing(t, f.do("GET", "/v1/volumes/data/files", q("path", "sub/"), nil)); len(got) != 0 {
		t.Fatalf("an empty folder listed %v", got)
	}
	expect(t, f.do("GET", "/v1/volumes/data/files", q("path", "hello.txt"), nil), 400, "not_a_folder")
	expect(t, f.do("GET", "/v1/volumes/data/files", q("path", "missing"), nil), 404, "not_found")
	expect(t, f.do("GET", "/v1/volumes/absent/files", nil, nil), 404, "volume_not_mounted")
	expect(t, f.do("GET", "/v1/volumes/Not_A_Claim/files", nil, nil), 400, "invalid_volume")
}

func TestDownloadStreamsWithRanges(t *testing.T) {
	f := newFixture(t, 0)
	resp := f.do("GET", "/v1/volumes/data/content", q("path", "hello.txt"), nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "hello, volume\n" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename=hello.txt` ||
		resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("headers %v", resp.Header)
	}
	resp = f.do("GET", "/v1/volumes/data/content", q("path", "hello.txt"), nil, "Range", "bytes=7-12")
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || string(body) != "volume" ||
		resp.Header.Get("Content-Range") != "bytes 7-12/14" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	expect(t, f.do("GET", "/v1/volumes/data/content", q("path", "sub"), nil), 400, "not_a_file")
	expect(t, f.do("GET", "/v1/volumes/data/content", q("path", ""), nil), 400, "path_required")
	expect(t, f.do("GET", "/v1/volumes/data/content", q("path", "nope"), nil), 404, "not_found")
}

func TestUploadIsWrittenWholeThenRenamed(t *testing.T) {
	f := newFixture(t, 1<<20)
	content := strings.Repeat("0123456789abcdef", 40000) // 640 000 bytes
	resp := f.do("PUT", "/v1/volumes/data/content", q("path", "sub/weights.bin"), strings.NewReader(content))
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var made entry
	if err := json.NewDecoder(resp.Body).Decode(&made); err != nil || made.Name != "weights.bin" ||
		made.Size != int64(len(content)) || made.Type != "file" {
		t.Fatalf("%+v %v", made, err)
	}
	got, _ := os.ReadFile(filepath.Join(f.root, "data", "sub", "weights.bin"))
	if string(got) != content {
		t.Fatal("the file on disk differs")
	}
	// a second upload replaces it
	expect(t, f.do("PUT", "/v1/volumes/data/content", q("path", "sub/weights.bin"), strings.NewReader("v2")), 201, "")
	if got, _ := os.ReadFile(filepath.Join(f.root, "data", "sub", "weights.bin")); string(got) != "v2" {
		t.Fatalf("replaced by %q", got)
	}
	expect(t, f.do("PUT", "/v1/volumes/data/content", q("path", "no/such/dir/x"), strings.NewReader("x")), 404, "not_found")
	expect(t, f.do("PUT", "/v1/volumes/data/content", q("path", "sub"), strings.NewReader("x")), 409, "is_a_folder")
	// beyond the limit: 413, and neither the file nor its temporary name is left
	expect(t, f.do("PUT", "/v1/volumes/data/content", q("path", "big.bin"),
		bytes.NewReader(make([]byte, 1<<20+1))), 413, "too_large")
	left, _ := os.ReadDir(filepath.Join(f.root, "data"))
	for _, e := range left {
		if e.Name() == "big.bin" || strings.HasPrefix(e.Name(), uploadPrefix) {
			t.Fatalf("a refused upload left %s", e.Name())
		}
	}
}

func TestAnInterruptedUploadLeavesNothing(t *testing.T) {
	f := newFixture(t, 0)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", f.srv.URL+"/v1/volumes/data/content?path=cut.bin", pr)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.ContentLength = 1 << 20
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := f.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	_, _ = pw.Write(make([]byte, 4096))
	waitFor(t, func() bool { return len(uploads(t, f)) == 1 })
	_ = pw.CloseWithError(fmt.Errorf("the client went away"))
	<-done
	waitFor(t, func() bool { return len(uploads(t, f)) == 0 })
	if _, err := os.Stat(filepath.Join(f.root, "data", "cut.bin")); !os.IsNotExist(err) {
		t.Fatal("half an upload took the name")
	}
}

func uploads(t *testing.T, f *fixture) []string {
	entries, err := os.ReadDir(filepath.Join(f.root, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), uploadPrefix) {
			found = append(found, e.Name())
		}
	}
	return found
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t, 0)
	write(t, filepath.Join(f.root, "data", "sub", "inside.txt"), "x")
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "sub"), nil), 409, "folder_not_empty")
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "hello.txt"), nil), 204, "")
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "sub", "recursive", "true"), nil), 204, "")
	if entries := listing(t, f.do("GET", "/v1/volumes/data/files", nil, nil)); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
	if err := os.Mkdir(filepath.Join(f.root, "data", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "empty"), nil), 204, "")
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "empty"), nil), 404, "not_found")
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "."), nil), 400, "path_required")
}

func TestMakeAFolder(t *testing.T) {
	f := newFixture(t, 0)
	expect(t, f.do("POST", "/v1/volumes/data/folders", q("path", "sub/runs"), nil), 201, "")
	if info, err := os.Stat(filepath.Join(f.root, "data", "sub", "runs")); err != nil || !info.IsDir() {
		t.Fatalf("no folder: %v", err)
	}
	expect(t, f.do("POST", "/v1/volumes/data/folders", q("path", "sub/runs"), nil), 409, "exists")
	expect(t, f.do("POST", "/v1/volumes/data/folders", q("path", "a/b"), nil), 404, "not_found")
}

func TestMove(t *testing.T) {
	f := newFixture(t, 0)
	expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", "hello.txt", "to", "sub/renamed.txt"), nil), 200, "")
	if got, _ := os.ReadFile(filepath.Join(f.root, "data", "sub", "renamed.txt")); string(got) != "hello, volume\n" {
		t.Fatalf("moved %q", got)
	}
	write(t, filepath.Join(f.root, "data", "taken.txt"), "mine")
	expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", "sub/renamed.txt", "to", "taken.txt"), nil), 409, "exists")
	if got, _ := os.ReadFile(filepath.Join(f.root, "data", "taken.txt")); string(got) != "mine" {
		t.Fatal("a move replaced a file")
	}
	expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", "sub", "to", "sub/inner"), nil), 400, "invalid_move")
	expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", "nope", "to", "x"), nil), 404, "not_found")
}

// Every way out of a volume, for every operation: refused with 400 path_outside, and nothing
// outside read, written, moved or deleted.
func TestEscapesAreRefused(t *testing.T) {
	f := newFixture(t, 0)
	data := filepath.Join(f.root, "data")
	if err := os.Symlink(f.outside, filepath.Join(data, "out-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.outside, "passwd"), filepath.Join(data, "out-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../other/secret.txt", filepath.Join(data, "to-other")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, filepath.Join(f.root, "escaped-volume")); err != nil {
		t.Fatal(err)
	}
	ways := map[string]string{
		"a `..`":                          "../other/secret.txt",
		"a `..` that stays inside":        "sub/../hello.txt",
		"a `..` at the end":               "sub/..",
		"an absolute path":                filepath.Join(f.outside, "passwd"),
		"a symbolic link to a folder out": "out-dir/passwd",
		"a symbolic link to a file out":   "out-file",
		"a link to another volume":        "to-other",
		"an absolute path to this volume": filepath.Join(data, "hello.txt"),
		"a NUL byte":                      "hello.txt\x00",
	}
	for what, p := range ways {
		t.Run(what, func(t *testing.T) {
			expect(t, f.do("GET", "/v1/volumes/data/content", q("path", p), nil), 400, "path_outside")
			expect(t, f.do("PUT", "/v1/volumes/data/content", q("path", p), strings.NewReader("pwned")), 400, "path_outside")
			expect(t, f.do("POST", "/v1/volumes/data/folders", q("path", p+"/new"), nil), 400, "path_outside")
			expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", "hello.txt", "to", p+"/new"), nil), 400, "path_outside")
		})
	}
	for _, p := range []string{"../other", "/", "out-dir", f.outside} {
		expect(t, f.do("GET", "/v1/volumes/data/files", q("path", p), nil), 400, "path_outside")
	}
	for _, p := range []string{"../other/secret.txt", "out-dir/passwd", filepath.Join(f.outside, "passwd")} {
		expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", p), nil), 400, "path_outside")
		expect(t, f.do("POST", "/v1/volumes/data/moves", q("from", p, "to", "stolen"), nil), 400, "path_outside")
	}
	expect(t, f.do("GET", "/v1/volumes/escaped-volume/files", nil, nil), 400, "path_outside")
	expect(t, f.do("GET", "/v1/volumes/..%2Fvolumes/files", nil, nil), 400, "invalid_volume")
	// outside and the other volume untouched
	if got, _ := os.ReadFile(filepath.Join(f.outside, "passwd")); string(got) != "outside the root\n" {
		t.Fatalf("outside: %q", got)
	}
	if entries, _ := os.ReadDir(f.outside); len(entries) != 1 {
		t.Fatalf("outside now holds %d entries", len(entries))
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "other", "secret.txt")); string(got) != "another volume's\n" {
		t.Fatalf("the other volume: %q", got)
	}
	// deleting a link that points out deletes the link, never what it points to
	expect(t, f.do("DELETE", "/v1/volumes/data/content", q("path", "out-file"), nil), 204, "")
	if _, err := os.Stat(filepath.Join(f.outside, "passwd")); err != nil {
		t.Fatal("deleting a link deleted its target")
	}
}

// What the system refuses (a read-only mount, a mode, a full volume) is the request's 4xx/5xx
// with its own code, never an internal error: a read-only claim is mounted so in the pod.
func TestSystemRefusalsAreNamed(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := httptest.NewRequest("PUT", "/v1/volumes/data/content?path=x", nil)
	for errno, want := range map[syscall.Errno]string{
		syscall.EROFS: "read_only", syscall.EACCES: "permission_denied", syscall.EPERM: "permission_denied",
		syscall.ENOSPC: "volume_full", syscall.EDQUOT: "volume_full", syscall.EIO: "internal",
	} {
		rec := httptest.NewRecorder()
		h.fail(rec, req, fmt.Errorf("writing the upload: %w", &os.PathError{Op: "write", Path: "x", Err: errno}))
		var answer struct{ Code string }
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Code != want {
			t.Errorf("%v: %d %s, want %s", errno, rec.Code, rec.Body, want)
		}
	}
}

// SIGTERM (here: the context's end) lets a request under way finish, then serve returns.
func TestStopLetsRequestsFinish(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	write(t, tokenFile, testToken+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, config{listen: "127.0.0.1:0", root: root, tokenFile: tokenFile},
			slog.New(slog.NewTextHandler(io.Discard, nil)), ready)
	}()
	addr := <-ready
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", "http://"+addr+"/v1/volumes/data/content?path=late.bin", pr)
	req.Header.Set("Authorization", "Bearer "+testToken)
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	_, _ = pw.Write([]byte("first half "))
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(filepath.Join(root, "data"))
		return len(entries) == 1
	})
	cancel()
	_, _ = pw.Write([]byte("second half"))
	_ = pw.Close()
	if got := <-status; got != http.StatusCreated {
		t.Fatalf("the upload under way got %d", got)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "data", "late.bin")); string(got) != "first half second half" {
		t.Fatalf("wrote %q", got)
	}
}

func TestFlags(t *testing.T) {
	if _, err := parseFlags([]string{"--root", "/x"}, io.Discard); err == nil {
		t.Fatal("no token file accepted")
	}
	empty := filepath.Join(t.TempDir(), "token")
	write(t, empty, "\n")
	if err := serve(context.Background(), config{listen: "127.0.0.1:0", root: t.TempDir(), tokenFile: empty},
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty token: %v", err)
	}
}
