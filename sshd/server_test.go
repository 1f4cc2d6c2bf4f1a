package main

// The server in this process on loopback, reached as gpuctl reaches it (SSH over a WebSocket at
// wsPath) by golang.org/x/crypto/ssh's client: who gets in, local forwarding, sftp, sessions.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
)

const testWorkload = "42"

// an opaque principal: the server compares it whole with the user asked for, nothing more
const testPrincipal = "8d2f61c0a7e94b5e"

// one reaper for the whole test process: two would race each other for their children's statuses
var testReaper = sync.OnceValue(newReaper)

func newSigner(t *testing.T) gossh.Signer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// certificate is what the portal issues; the zero value of each field is the usual choice.
type certificate struct {
	principal   string
	workload    string
	validAfter  time.Time
	validBefore time.Time
	extensions  []string
}

// certify signs the user's key as the portal does and gives the signer a client presents.
func certify(t *testing.T, ca, user gossh.Signer, c certificate) gossh.Signer {
	t.Helper()
	if c.principal == "" {
		c.principal = testPrincipal
	}
	if c.workload == "" {
		c.workload = testWorkload
	}
	if c.validAfter.IsZero() {
		c.validAfter = time.Now().Add(-time.Minute)
	}
	if c.validBefore.IsZero() {
		c.validBefore = time.Now().Add(10 * time.Minute)
	}
	if c.extensions == nil {
		c.extensions = []string{"permit-pty", "permit-port-forwarding"}
	}
	extensions := map[string]string{}
	for _, e := range c.extensions {
		extensions[e] = ""
	}
	cert := &gossh.Certificate{
		Key: user.PublicKey(), CertType: gossh.UserCert, Serial: 12345678901,
		KeyId: "user@gpu-portal", ValidPrincipals: []string{c.principal},
		ValidAfter: uint64(c.validAfter.Unix()), ValidBefore: uint64(c.validBefore.Unix()),
		Permissions: gossh.Permissions{
			CriticalOptions: map[string]string{workloadOption: c.workload},
			Extensions:      extensions,
		},
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewCertSigner(cert, user)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// logLines collects the server's log as JSON records (the same attributes as in production).
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find: the records with this message whose attributes contain the texts given.
func (l *logLines) find(msg string, contains map[string]string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var record map[string]any
		if json.Unmarshal([]byte(line), &record) != nil || record["msg"] != msg {
			continue
		}
		matches := true
		for name, text := range contains {
			if !strings.Contains(fmt.Sprint(record[name]), text) {
				matches = false
			}
		}
		if matches {
			found = append(found, record)
		}
	}
	return found
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type testServer struct {
	url     string
	ca      gossh.Signer
	hostKey gossh.PublicKey
	log     *logLines
}

// startServer runs the server as `run` does, with ca.pub, host_key and report_token in a
// config folder, listening on loopback; portalURL "" runs it without reports.
func startServer(t *testing.T, portalURL string) *testServer {
	t.Helper()
	ca := newSigner(t)
	dir := t.TempDir()
	_, hostPrivate, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(hostPrivate, "")
	if err != nil {
		t.Fatal(err)
	}
	host, err := gossh.NewSignerFromKey(hostPrivate)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"ca.pub":       gossh.MarshalAuthorizedKey(ca.PublicKey()),
		"host_key":     pem.EncodeToMemory(block),
		"report_token": []byte("report-token-for-tests\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs := &logLines{}
	cfg := config{configDir: dir, workload: testWorkload, portal: portalURL,
		checkInterval: time.Minute, shell: "/bin/sh"}
	srv, err := newServer(cfg, slog.New(slog.NewJSONHandler(logs, nil)), testReaper())
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.serve(listener)
	t.Cleanup(srv.shutdown)
	return &testServer{url: "ws://" + listener.Addr().String() + wsPath, ca: ca,
		hostKey: host.PublicKey(), log: logs}
}

// dial connects as user with the signer's key (a certificate or a plain key), the host key
// checked strictly.
func (ts *testServer) dial(t *testing.T, user string, signer gossh.Signer) (*gossh.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ts.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := websocket.NetConn(t.Context(), ws, websocket.MessageBinary)
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second)) // no test waits forever on a handshake
	conn, chans, reqs, err := gossh.NewClientConn(nc, "workload", &gossh.ClientConfig{
		User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(ts.hostKey),
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	client := gossh.NewClient(conn, chans, reqs)
	t.Cleanup(func() { client.Close() })
	return client, nil
}

// login: a connection with a certificate the server takes.
func (ts *testServer) login(t *testing.T, c certificate) *gossh.Client {
	t.Helper()
	client, err := ts.dial(t, testPrincipal, certify(t, ts.ca, newSigner(t), c))
	if err != nil {
		t.Fatalf("refused: %v\n%s", err, ts.log)
	}
	return client
}

func TestAuthentication(t *testing.T) {
	ts := startServer(t, "")
	client := ts.login(t, certificate{})
	out, err := mustSession(t, client).Output("echo in as $USER")
	if err != nil || string(out) != "in as "+testPrincipal+"\n" {
		t.Fatalf("a certificate of the CA for this user and workload: %q, %v", out, err)
	}

	otherCA := newSigner(t)
	cases := []struct {
		name, user, reason string
		signer             func() gossh.Signer
	}{
		{"another principal", "someone-else", `principal "someone-else" not in the set of valid principals`,
			func() gossh.Signer { return certify(t, ts.ca, newSigner(t), certificate{}) }},
		{"a principal that only begins like the user", testPrincipal[:8], "not in the set of valid principals",
			func() gossh.Signer { return certify(t, ts.ca, newSigner(t), certificate{}) }},
		{"expired", testPrincipal, "cert has expired",
			func() gossh.Signer {
				return certify(t, ts.ca, newSigner(t), certificate{
					validAfter: time.Now().Add(-time.Hour), validBefore: time.Now().Add(-time.Minute)})
			}},
		{"not yet valid", testPrincipal, "cert is not yet valid",
			func() gossh.Signer {
				return certify(t, ts.ca, newSigner(t), certificate{validAfter: time.Now().Add(time.Hour)})
			}},
		{"a plain key", testPrincipal, "a plain key, not a certificate of the portal",
			func() gossh.Signer { return newSigner(t) }},
		{"another CA", testPrincipal, "signed by a CA this workload does not trust",
			func() gossh.Signer { return certify(t, otherCA, newSigner(t), certificate{}) }},
		{"another workload", testPrincipal, `the certificate is for workload "7", not "42"`,
			func() gossh.Signer { return certify(t, ts.ca, newSigner(t), certificate{workload: "7"}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := ts.dial(t, tc.user, tc.signer())
			if err == nil {
				client.Close()
				t.Fatal("admitted")
			}
			if !strings.Contains(err.Error(), "unable to authenticate") {
				t.Fatalf("not an authentication failure: %v", err)
			}
			if ts.log.find("refused", map[string]string{"reason": tc.reason, "user": tc.user}) == nil {
				t.Fatalf("no refusal logged with %q:\n%s", tc.reason, ts.log)
			}
		})
	}
}

// scriptedPortal answers the session reports as a test says and records them.
type scriptedPortal struct {
	mu      sync.Mutex
	reports []map[string]any
	start   func() (int, string)
}

func (p *scriptedPortal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var report map[string]any
	_ = json.NewDecoder(r.Body).Decode(&report)
	p.mu.Lock()
	p.reports = append(p.reports, report)
	p.mu.Unlock()
	status, body := http.StatusOK, `{}`
	switch report["event"] {
	case "start":
		status, body = p.start()
	case "check":
		body = `{"end": {}}`
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (p *scriptedPortal) of(event string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var found []map[string]any
	for _, r := range p.reports {
		if r["event"] == event {
			found = append(found, r)
		}
	}
	return found
}

func TestThePortalIsAskedOnceTheKeyIsProven(t *testing.T) {
	portal := &scriptedPortal{start: func() (int, string) { return http.StatusOK, `{"allowed": true}` }}
	web := httptest.NewServer(portal)
	t.Cleanup(web.Close) // after the server's shutdown, which sends the end reports
	ts := startServer(t, web.URL)

	// refused by the server's own checks: the portal hears nothing
	if _, err := ts.dial(t, testPrincipal, certify(t, newSigner(t), newSigner(t), certificate{})); err == nil {
		t.Fatal("another CA's certificate admitted")
	}
	if got := portal.of("start"); len(got) != 0 {
		t.Fatalf("the portal was asked about a refused certificate: %v", got)
	}

	client := ts.login(t, certificate{})
	out, err := mustSession(t, client).Output("echo $GPU_PORTAL_SSH_SESSION")
	if err != nil {
		t.Fatal(err)
	}
	starts := portal.of("start")
	if len(starts) != 1 || starts[0]["session"] != strings.TrimSpace(string(out)) ||
		starts[0]["user"] != testPrincipal || starts[0]["key_id"] != "user@gpu-portal" ||
		starts[0]["serial"] != float64(12345678901) {
		t.Fatalf("start reports: %v (session %q)", starts, out)
	}

	portal.start = func() (int, string) { return http.StatusOK, `{"allowed": false, "reason": "not a member"}` }
	if _, err := ts.dial(t, testPrincipal, certify(t, ts.ca, newSigner(t), certificate{})); err == nil {
		t.Fatal("admitted against the portal's refusal")
	}
	if ts.log.find("refused", map[string]string{"reason": "the portal refused: not a member"}) == nil {
		t.Fatalf("the portal's refusal is not logged:\n%s", ts.log)
	}
}

// echoServer: a TCP service on loopback, what ssh -L reaches inside the workload.
func echoServer(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return listener.Addr().String()
}

func TestLocalForwarding(t *testing.T) {
	ts := startServer(t, "")
	target := echoServer(t)

	conn, err := ts.login(t, certificate{}).Dial("tcp", target)
	if err != nil {
		t.Fatalf("forwarding to %s: %v", target, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping" {
		t.Fatalf("through the tunnel: %q, %v", got, err)
	}

	withoutPermission := ts.login(t, certificate{extensions: []string{"permit-pty"}})
	_, err = withoutPermission.Dial("tcp", target)
	var refused *gossh.OpenChannelError
	if !errors.As(err, &refused) || refused.Reason != gossh.Prohibited {
		t.Fatalf("forwarding without permit-port-forwarding: %v", err)
	}
	if ts.log.find("port forwarding refused", map[string]string{"target": target}) == nil {
		t.Fatalf("the refusal is not logged:\n%s", ts.log)
	}

	// remote forwarding (ssh -R) is never served
	if _, err := ts.login(t, certificate{}).Listen("tcp", "127.0.0.1:0"); err == nil {
		t.Fatal("remote forwarding accepted")
	}
}

func TestSFTP(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ts := startServer(t, "")
	client, err := sftp.NewClient(ts.login(t, certificate{}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i)
	}
	up, err := client.Create("uploaded.bin") // relative: in HOME
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(home, "uploaded.bin")); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("put: %d bytes, %v", len(got), err)
	}

	if err := os.WriteFile(filepath.Join(home, "down.txt"), []byte("from the workload\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	down, err := client.Open("down.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if got, err := io.ReadAll(down); err != nil || string(got) != "from the workload\n" {
		t.Fatalf("get: %q, %v", got, err)
	}
}

func mustSession(t *testing.T, client *gossh.Client) *gossh.Session {
	t.Helper()
	session, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

func TestSessions(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ts := startServer(t, "")
	client := ts.login(t, certificate{})

	t.Run("a command's output, stderr and exit status", func(t *testing.T) {
		session := mustSession(t, client)
		var stdout, stderr bytes.Buffer
		session.Stdout, session.Stderr = &stdout, &stderr
		err := session.Run(`echo "out $PWD"; echo err >&2; exit 3`)
		var exit *gossh.ExitError
		if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
			t.Fatalf("exit: %v", err)
		}
		if stdout.String() != "out "+home+"\n" || stderr.String() != "err\n" {
			t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
	})

	t.Run("a process killed by a signal is told as such", func(t *testing.T) {
		err := mustSession(t, client).Run("kill -TERM $$")
		var exit *gossh.ExitError
		if !errors.As(err, &exit) || exit.Signal() != "TERM" {
			t.Fatalf("exit: %v", err)
		}
	})

	t.Run("only locale and TERM variables pass from the client", func(t *testing.T) {
		session := mustSession(t, client)
		for name, value := range map[string]string{"LC_GPU_TEST": "fr_FR", "FOO_GPU_TEST": "bar"} {
			if err := session.Setenv(name, value); err != nil {
				t.Fatal(err)
			}
		}
		out, err := session.Output(`echo "[$LC_GPU_TEST] [$FOO_GPU_TEST]"`)
		if err != nil || string(out) != "[fr_FR] []\n" {
			t.Fatalf("%q, %v", out, err)
		}
	})

	t.Run("a terminal passes its output unchanged", func(t *testing.T) {
		session := mustSession(t, client)
		if err := session.RequestPty("xterm-256color", 24, 80, gossh.TerminalModes{}); err != nil {
			t.Fatal(err)
		}
		out, err := session.Output(`tty >/dev/null && echo "$TERM" && stty raw -echo && printf 'a\nb\r\nc'`)
		if err != nil {
			t.Fatal(err)
		}
		// the terminal turned the first newline into \r\n (cooked); in raw mode a bare \n stays
		if string(out) != "xterm-256color\r\na\nb\r\nc" {
			t.Fatalf("%q", out)
		}
	})

	t.Run("no terminal without permit-pty", func(t *testing.T) {
		session := mustSession(t, ts.login(t, certificate{extensions: []string{"permit-port-forwarding"}}))
		if err := session.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err == nil {
			t.Fatal("a terminal without permit-pty")
		}
	})

	t.Run("a signal from the client reaches the process", func(t *testing.T) {
		session := mustSession(t, client)
		stdout, err := session.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := session.Start(`trap 'echo got USR1; exit 4' USR1; echo ready; while :; do sleep 0.05; done`); err != nil {
			t.Fatal(err)
		}
		output := bufio.NewReader(stdout)
		if line, err := output.ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("%q, %v", line, err)
		}
		if err := session.Signal(gossh.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if rest, _ := io.ReadAll(output); string(rest) != "got USR1\n" {
			t.Fatalf("%q", rest)
		}
		var exit *gossh.ExitError
		if err := session.Wait(); !errors.As(err, &exit) || exit.ExitStatus() != 4 {
			t.Fatalf("exit: %v", err)
		}
	})
}
