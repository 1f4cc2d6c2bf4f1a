package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// uploadPrefix names an upload being written; it is renamed to its name only once whole, and
// listings leave such files out.
const uploadPrefix = ".gpu-portal-upload-"

// copyBuffer is what an upload is copied through: large enough that a 1 GiB upload costs few
// system calls.
const copyBuffer = 1 << 20

// A volume's folder is named by its claim: a Kubernetes object name.
var claimName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// errOutside is every path that would leave its volume, whether refused by name here or by
// os.Root when a symbolic link points out.
var errOutside = errors.New("the path leaves the volume")

// entry is one file or folder as the portal's API shows it.
type entry struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

type handler struct {
	root      *os.Root
	token     []byte
	maxUpload int64
	log       *slog.Logger
	mux       *http.ServeMux
}

func newHandler(root, token string, maxUpload int64, logger *slog.Logger) (*handler, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("opening the root: %w", err)
	}
	h := &handler{root: r, token: []byte(token), maxUpload: maxUpload, log: logger,
		mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	h.mux.HandleFunc("GET /v1/volumes/{claim}/files", h.volume(h.list))
	h.mux.HandleFunc("GET /v1/volumes/{claim}/content", h.volume(h.download))
	h.mux.HandleFunc("HEAD /v1/volumes/{claim}/content", h.volume(h.download))
	h.mux.HandleFunc("PUT /v1/volumes/{claim}/content", h.volume(h.upload))
	h.mux.HandleFunc("DELETE /v1/volumes/{claim}/content", h.volume(h.remove))
	h.mux.HandleFunc("POST /v1/volumes/{claim}/folders", h.volume(h.mkdir))
	h.mux.HandleFunc("POST /v1/volumes/{claim}/moves", h.volume(h.move))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
	return h, nil
}

func (h *handler) close() { _ = h.root.Close() }

// ServeHTTP checks the bearer token of every request but the health check, and logs each one
// (never its headers: the token is among them).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	if r.URL.Path != "/healthz" && !h.authorized(r) {
		writeError(rec, http.StatusUnauthorized, "unauthenticated", "a valid bearer token is needed")
	} else {
		h.mux.ServeHTTP(rec, r)
	}
	if r.URL.Path != "/healthz" {
		h.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"bytes", rec.bytes, "duration", time.Since(started).Round(time.Millisecond))
	}
}

func (h *handler) authorized(r *http.Request) bool {
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(given), h.token) == 1
}

// volume opens the request's volume as a root of its own for the operation: a path of one
// volume can never reach another's folder.
func (h *handler) volume(op func(http.ResponseWriter, *http.Request, *os.Root)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claim := r.PathValue("claim")
		if !claimName.MatchString(claim) {
			writeError(w, http.StatusBadRequest, "invalid_volume", "not a volume's name")
			return
		}
		vol, err := h.root.OpenRoot(claim)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				writeError(w, http.StatusNotFound, "volume_not_mounted", "this volume is not mounted here")
				return
			}
			h.fail(w, r, fmt.Errorf("opening the volume %s: %w", claim, err))
			return
		}
		defer vol.Close()
		op(w, r, vol)
	}
}

// volumePath turns a request's path into a name inside the volume ("." for its top). A path
// is relative to the volume; an absolute one or one with a `..` is refused by name, before
// os.Root would refuse it (a `..` that stays inside is refused too: no path needs one).
func volumePath(raw string) (string, error) {
	if strings.ContainsRune(raw, 0) {
		return "", fmt.Errorf("%w: a NUL byte", errOutside)
	}
	if strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, `\`) {
		return "", fmt.Errorf("%w: an absolute path", errOutside)
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: a `..`", errOutside)
		}
	}
	return path.Clean("./" + raw), nil
}

// filePath is a path that names something inside the volume, never the volume itself.
func filePath(r *http.Request, param string) (string, error) {
	name, err := volumePath(r.URL.Query().Get(param))
	if err != nil {
		return "", err
	}
	if name == "." {
		return "", errNeedName
	}
	return name, nil
}

var errNeedName = errors.New("a path inside the volume is needed")

func (h *handler) list(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	dir, err := volumePath(r.URL.Query().Get("path"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f, err := vol.Open(dir)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !info.IsDir() {
		writeError(w, http.StatusBadRequest, "not_a_folder", "this path is a file, not a folder")
		return
	}
	dirents, err := f.ReadDir(-1)
	if err != nil {
		h.fail(w, r, fmt.Errorf("reading the folder: %w", err))
		return
	}
	entries := make([]entry, 0, len(dirents))
	for _, d := range dirents {
		if strings.HasPrefix(d.Name(), uploadPrefix) {
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue // gone since the folder was read
		}
		entries = append(entries, entryOf(d.Name(), info))
	}
	// folders first, then by name: what a file browser shows
	sort.Slice(entries, func(i, j int) bool {
		if (entries[i].Type == "directory") != (entries[j].Type == "directory") {
			return entries[i].Type == "directory"
		}
		return entries[i].Name < entries[j].Name
	})
	writeJSON(w, http.StatusOK, entries)
}

func entryOf(name string, info fs.FileInfo) entry {
	kind := "other"
	switch mode := info.Mode(); {
	case mode.IsRegular():
		kind = "file"
	case mode.IsDir():
		kind = "directory"
	case mode&fs.ModeSymlink != 0:
		kind = "link"
	}
	size := info.Size()
	if kind != "file" {
		size = 0
	}
	return entry{Name: name, Type: kind, Size: size,
		Modified: info.ModTime().UTC().Format(time.RFC3339)}
}

// download streams a file; net/http answers ranges, HEAD and conditional requests, and sends
// the file with sendfile where it can.
func (h *handler) download(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	name, err := filePath(r, "path")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f, err := vol.Open(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !info.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, "not_a_file", "this path is a folder, not a file")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition",
		mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// upload writes the body to a new file beside the target and renames it into place once the
// whole body is on disk: a reader never sees half a file, and a failed upload leaves nothing.
func (h *handler) upload(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	name, err := filePath(r, "path")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// what has the name now, its links followed: a link that points out of the volume is
	// refused as the path of any other operation is, not replaced
	switch info, err := vol.Stat(name); {
	case err == nil && info.IsDir():
		writeError(w, http.StatusConflict, "is_a_folder", "a folder has this name")
		return
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		h.fail(w, r, err)
		return
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(path.Dir(name), uploadPrefix+hex.EncodeToString(suffix[:]))
	f, err := vol.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = vol.Remove(tmp)
		}
	}()
	body := io.Reader(r.Body)
	if h.maxUpload > 0 {
		body = http.MaxBytesReader(w, r.Body, h.maxUpload)
	}
	// io.CopyBuffer would hand the copy to the file's ReadFrom, whose own buffer is 32 KiB
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, body, make([]byte, copyBuffer)); err != nil {
		h.fail(w, r, fmt.Errorf("writing the upload: %w", err))
		return
	}
	if err := f.Sync(); err != nil {
		h.fail(w, r, fmt.Errorf("writing the upload: %w", err))
		return
	}
	if err := f.Close(); err != nil {
		h.fail(w, r, fmt.Errorf("writing the upload: %w", err))
		return
	}
	done = true
	if err := vol.Rename(tmp, name); err != nil {
		_ = vol.Remove(tmp)
		h.fail(w, r, fmt.Errorf("putting the upload in place: %w", err))
		return
	}
	info, err := vol.Lstat(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, entryOf(path.Base(name), info))
}

// remove deletes a file, a link or an empty folder; a folder with something in it only when
// the request says recursive=true.
func (h *handler) remove(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	name, err := filePath(r, "path")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := vol.Lstat(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if info.IsDir() && r.URL.Query().Get("recursive") == "true" {
		err = vol.RemoveAll(name)
	} else {
		err = vol.Remove(name)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) mkdir(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	name, err := filePath(r, "path")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := vol.Mkdir(name, 0o777); err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := vol.Lstat(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, entryOf(path.Base(name), info))
}

// move renames a file or folder within its volume; it never replaces what has the new name.
func (h *handler) move(w http.ResponseWriter, r *http.Request, vol *os.Root) {
	from, err := filePath(r, "from")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	to, err := filePath(r, "to")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := vol.Lstat(from); err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := vol.Lstat(to); err == nil {
		writeError(w, http.StatusConflict, "exists", "something already has this name")
		return
	}
	if err := vol.Rename(from, to); err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := vol.Lstat(to)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(path.Base(to), info))
}

// escapes is os.Root's refusal of a path that leaves it (inside a PathError or, from a
// rename, a LinkError): its error is not exported, so it is known by its text.
func escapes(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// fail answers an operation's error as JSON {code, detail}: what the request got wrong as a
// 4xx the portal passes on, anything else a 500 that is logged here.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, errOutside) || escapes(err):
		writeError(w, http.StatusBadRequest, "path_outside", "the path leaves the volume")
	case errors.Is(err, errNeedName):
		writeError(w, http.StatusBadRequest, "path_required", errNeedName.Error())
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("an upload is at most %d bytes", tooLarge.Limit))
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "not_found", "no such file or folder")
	case errors.Is(err, syscall.ENOTEMPTY): // before ErrExist, which it also is
		writeError(w, http.StatusConflict, "folder_not_empty",
			"the folder is not empty (delete it with recursive=true)")
	case errors.Is(err, fs.ErrExist):
		writeError(w, http.StatusConflict, "exists", "something already has this name")
	case errors.Is(err, syscall.EROFS):
		writeError(w, http.StatusForbidden, "read_only", "this volume is mounted read-only")
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, "permission_denied", "the file server may not do this here")
	case errors.Is(err, syscall.ENOTDIR):
		writeError(w, http.StatusBadRequest, "not_a_folder", "a part of the path is a file, not a folder")
	case errors.Is(err, syscall.EISDIR):
		writeError(w, http.StatusConflict, "is_a_folder", "a folder has this name")
	case errors.Is(err, syscall.EINVAL):
		writeError(w, http.StatusBadRequest, "invalid_move", "a folder cannot move into itself")
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		writeError(w, http.StatusInsufficientStorage, "volume_full", "the volume is full")
	default:
		h.log.Error("a request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "the file server failed")
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"code":"internal","detail":"encoding"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, map[string]string{"code": code, "detail": detail})
}

// recorder keeps the status and size of an answer for the request's log line, and passes
// ReadFrom through so that a download still goes out by sendfile.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	n, err := io.Copy(r.ResponseWriter, src)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
