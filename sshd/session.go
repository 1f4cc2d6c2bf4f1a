package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/gliderlabs/ssh"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
)

// How long output is still copied after a session's process exited (a background process that
// keeps the pipe or terminal open does not hold the session open).
const drainAfterExit = 2 * time.Second

// sessionChannel is gliderlabs/ssh's session handler, given the channel as this server keeps
// it (sessionChan): known to its connection (an ending connection tells each open session why,
// on its stderr), and marked gone once the client closed it (what still runs is hung up on).
func (s *server) sessionChannel(srv *ssh.Server, conn *gossh.ServerConn, nc gossh.NewChannel, ctx ssh.Context) {
	accept := &acceptSession{NewChannel: nc, conn: connOf(ctx)}
	ssh.DefaultSessionHandler(srv, conn, accept, ctx) // returns once the channel's requests end
	if accept.ch != nil {
		accept.conn.removeChannel(accept.ch.Channel)
		close(accept.ch.gone)
	}
}

type acceptSession struct {
	gossh.NewChannel
	conn *connection
	ch   *sessionChan
}

func (a *acceptSession) Accept() (gossh.Channel, <-chan *gossh.Request, error) {
	ch, reqs, err := a.NewChannel.Accept()
	if err != nil {
		return nil, nil, fmt.Errorf("accepting a session channel: %w", err)
	}
	a.conn.addChannel(ch)
	a.ch = &sessionChan{Channel: ch, gone: make(chan struct{})}
	return a.ch, reqs, nil
}

// sessionChan is a session's channel under gliderlabs' Session. Two things the Session does not
// give are reached through it: the channel's own Write (the Session's rewrites every \n as \r\n
// once a terminal was asked for, which is right for a program writing to the Session as if to
// a terminal, and wrong here: a real terminal has already translated its output as its modes
// say, and a program in raw mode, tmux or a full-screen editor, moves the cursor down with a
// bare \n), and the end of the channel's requests (the client closed it: hang up on what runs).
type sessionChan struct {
	gossh.Channel
	gone chan struct{}
}

// Stderr is the channel's own stderr; its value leads back to the channel (chanOf): gliderlabs'
// Session passes Stderr through untouched.
func (c *sessionChan) Stderr() io.ReadWriter {
	return chanStderr{ReadWriter: c.Channel.Stderr(), ch: c}
}

type chanStderr struct {
	io.ReadWriter
	ch *sessionChan
}

// chanOf: the channel under a Session (nil for one this server did not accept).
func chanOf(sess ssh.Session) *sessionChan {
	if stderr, ok := sess.Stderr().(chanStderr); ok {
		return stderr.ch
	}
	return nil
}

// output: where a session's standard output goes, byte for byte.
func output(sess ssh.Session) io.Writer {
	if ch := chanOf(sess); ch != nil {
		return ch.Channel
	}
	return sess
}

// runSession runs the shell, or `shell -c command`, for a shell or exec request: as this
// process's own user (the workload's), with the application's environment, on a terminal when
// one was asked for, else on pipes.
func (s *server) runSession(sess ssh.Session) {
	c := connOf(sess.Context())
	shell, err := s.shell()
	if err != nil {
		fmt.Fprintf(sess.Stderr(), "gpu-portal-sshd: %v\r\n", err)
		_ = sess.Exit(127)
		return
	}
	argv := []string{"-" + filepath.Base(shell)} // a login shell, as sshd starts it
	if command := sess.RawCommand(); command != "" {
		argv = []string{shell, "-c", command}
	}
	home := homeDir()
	term, windows, isTerminal := sess.Pty()
	env := sessionEnv(os.Environ(), acceptedEnv(sess.Environ()), map[string]string{
		"HOME": home, "USER": c.user, "LOGNAME": c.user, "SHELL": shell,
		"GPU_PORTAL_SSH_SESSION": c.id, "TERM": term.Term})
	attr := &os.ProcAttr{Dir: workingDir(home), Env: env, Sys: &syscall.SysProcAttr{Setsid: true}}
	var streams *processStreams
	if isTerminal {
		streams, err = terminalStreams(sess, attr, term.Window, windows)
	} else {
		streams, err = pipeStreams(sess, attr)
	}
	if err != nil {
		fmt.Fprintf(sess.Stderr(), "gpu-portal-sshd: %v\r\n", err)
		_ = sess.Exit(1)
		return
	}
	signals := make(chan ssh.Signal, 8)
	sess.Signals(signals)
	proc, done, err := s.reaper.start(shell, argv, attr)
	streams.started()
	if err != nil {
		sess.Signals(nil)
		streams.close()
		fmt.Fprintf(sess.Stderr(), "gpu-portal-sshd: cannot start %s: %v\r\n", shell, err)
		_ = sess.Exit(127)
		return
	}
	// hang up on what still runs once the client closed the channel or the connection ended
	var gone <-chan struct{}
	if ch := chanOf(sess); ch != nil {
		gone = ch.gone
	}
	ended := sess.Context().Done()
	var status syscall.WaitStatus
	for waiting := true; waiting; {
		select {
		case status = <-done:
			waiting = false
		case name := <-signals:
			if n, ok := signalNumbers[string(name)]; ok {
				_ = syscall.Kill(proc.Pid, n)
			}
		case <-gone:
			_ = syscall.Kill(-proc.Pid, syscall.SIGHUP)
			gone = nil
		case <-ended:
			_ = syscall.Kill(-proc.Pid, syscall.SIGHUP)
			ended = nil
		}
	}
	sess.Signals(nil) // before no one reads signals: gliderlabs sends them under its lock
	_ = proc.Release()
	streams.drain(drainAfterExit)
	tellExit(sess, status)
}

// processStreams: a session process's stdin, stdout and stderr, copied to and from the channel.
type processStreams struct {
	child  []*os.File // the process's ends: closed here once it has them
	ours   []*os.File // closed once the output is drained
	copies sync.WaitGroup

	mu     sync.Mutex // a resize does not meet the close
	closed bool
}

func (p *processStreams) started() {
	for _, f := range p.child {
		f.Close()
	}
}

func (p *processStreams) drain(wait time.Duration) {
	drained := make(chan struct{})
	go func() { p.copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(wait):
	}
	p.close()
}

func (p *processStreams) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, f := range p.ours {
		f.Close()
	}
}

// terminalStreams: a pseudo-terminal, its size following the client's window.
func terminalStreams(sess ssh.Session, attr *os.ProcAttr, window ssh.Window, windows <-chan ssh.Window) (*processStreams, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("no terminal: %w", err)
	}
	p := &processStreams{child: []*os.File{tty}, ours: []*os.File{ptmx}}
	resize := func(w ssh.Window) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.closed {
			_ = pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(w.Height), Cols: uint16(w.Width)})
		}
	}
	resize(window)
	go func() { // gliderlabs closes it when the channel's requests end
		for w := range windows {
			resize(w)
		}
	}()
	attr.Files = []*os.File{tty, tty, tty}
	attr.Sys.Setctty, attr.Sys.Ctty = true, 0
	go func() { _, _ = io.Copy(ptmx, sess) }()
	p.copies.Add(1)
	go func() { defer p.copies.Done(); _, _ = io.Copy(output(sess), ptmx) }()
	return p, nil
}

// pipeStreams: three pipes, stdin closed when the client sends EOF.
func pipeStreams(sess ssh.Session, attr *os.ProcAttr) (*processStreams, error) {
	stdin, toStdin, err1 := os.Pipe()
	fromStdout, stdout, err2 := os.Pipe()
	fromStderr, stderr, err3 := os.Pipe()
	p := &processStreams{child: []*os.File{stdin, stdout, stderr},
		ours: []*os.File{fromStdout, fromStderr, toStdin}}
	if err := errors.Join(err1, err2, err3); err != nil {
		p.started()
		p.close()
		return nil, fmt.Errorf("no pipes: %w", err)
	}
	attr.Files = []*os.File{stdin, stdout, stderr}
	go func() { _, _ = io.Copy(toStdin, sess); toStdin.Close() }()
	p.copies.Add(2)
	go func() { defer p.copies.Done(); _, _ = io.Copy(output(sess), fromStdout) }()
	go func() { defer p.copies.Done(); _, _ = io.Copy(sess.Stderr(), fromStderr) }()
	return p, nil
}

// tellExit tells the client how the session's process ended, then closes the channel: exit-signal
// for a signal OpenSSH names, else exit-status (128 + the signal for another).
func tellExit(sess ssh.Session, status syscall.WaitStatus) {
	if !status.Signaled() {
		_ = sess.Exit(status.ExitStatus())
		return
	}
	name, ok := signalNames[status.Signal()]
	if !ok {
		_ = sess.Exit(128 + int(status.Signal()))
		return
	}
	// gliderlabs' Session has no exit-signal; once the channel is closed, its own Exit(0)
	// after this handler sends nothing
	_, _ = sess.SendRequest("exit-signal", false, gossh.Marshal(struct {
		Signal     string
		CoreDumped bool
		Message    string
		Lang       string
	}{Signal: name}))
	_ = sess.Close()
}

// serveSFTP serves the sftp subsystem (what scp and sftp of OpenSSH ≥ 9 use) from HOME.
func (s *server) serveSFTP(sess ssh.Session) {
	c := connOf(sess.Context())
	server, err := sftp.NewServer(sftpStream{Reader: sess, Writer: output(sess), Closer: sess},
		sftp.WithServerWorkingDirectory(workingDir(homeDir())))
	if err != nil {
		s.log.Error("sftp did not start", "session", c.id, "error", err)
		_ = sess.Exit(1)
		return
	}
	if err := server.Serve(); err != nil {
		s.log.Info("sftp ended on an error", "session", c.id, "error", err)
		_ = sess.Exit(1)
		return
	}
	_ = sess.Exit(0)
}

type sftpStream struct {
	io.Reader
	io.Writer
	io.Closer
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "ABRT", syscall.SIGALRM: "ALRM", syscall.SIGFPE: "FPE", syscall.SIGHUP: "HUP",
	syscall.SIGILL: "ILL", syscall.SIGINT: "INT", syscall.SIGKILL: "KILL", syscall.SIGPIPE: "PIPE",
	syscall.SIGQUIT: "QUIT", syscall.SIGSEGV: "SEGV", syscall.SIGTERM: "TERM", syscall.SIGUSR1: "USR1",
	syscall.SIGUSR2: "USR2",
}

var signalNumbers = func() map[string]syscall.Signal {
	m := map[string]syscall.Signal{}
	for n, name := range signalNames {
		m[name] = n
	}
	return m
}()

// acceptedEnv: of the client's env requests, LANG, TERM and LC_* (as OpenSSH's AcceptEnv
// is commonly set); the rest is dropped.
func acceptedEnv(requested []string) []string {
	var kept []string
	for _, kv := range requested {
		name, _, _ := strings.Cut(kv, "=")
		if name == "LANG" || name == "TERM" || strings.HasPrefix(name, "LC_") {
			kept = append(kept, kv)
		}
	}
	return kept
}

// sessionEnv: the application's environment with the session's variables set over it (an empty
// value leaves the variable out), after the accepted env requests.
func sessionEnv(base, requested []string, set map[string]string) []string {
	override := map[string]string{}
	for _, kv := range requested {
		name, value, _ := strings.Cut(kv, "=")
		override[name] = value
	}
	for name, value := range set {
		if value != "" {
			override[name] = value
		}
	}
	env := make([]string, 0, len(base)+len(override))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := override[name]; !ok {
			env = append(env, kv)
		}
	}
	for name, value := range override {
		env = append(env, name+"="+value)
	}
	return env
}

// workingDir: HOME when it is a folder, else /.
func workingDir(home string) string {
	if info, err := os.Stat(home); err == nil && info.IsDir() {
		return home
	}
	return "/"
}

// passwdEntry: this process's uid's line of /etc/passwd (home, shell), if there is one.
func passwdEntry() (home, shell string) {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	uid := strconv.Itoa(os.Getuid())
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Split(scanner.Text(), ":")
		if len(fields) >= 7 && fields[2] == uid {
			return fields[5], fields[6]
		}
	}
	return "", ""
}

func homeDir() string {
	if home := os.Getenv("HOME"); home != "" {
		return home
	}
	if home, _ := passwdEntry(); home != "" {
		return home
	}
	return "/"
}

// shell: --shell, else the uid's login shell (not nologin or false), $SHELL, /bin/bash, /bin/sh.
func (s *server) shell() (string, error) {
	if s.cfg.shell != "" {
		if !executable(s.cfg.shell) {
			return "", fmt.Errorf("the shell %s (--shell) is not an executable file", s.cfg.shell)
		}
		return s.cfg.shell, nil
	}
	_, login := passwdEntry()
	if base := filepath.Base(login); base == "nologin" || base == "false" {
		login = ""
	}
	for _, candidate := range []string{login, os.Getenv("SHELL"), "/bin/bash", "/bin/sh"} {
		if candidate != "" && executable(candidate) {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("this image has no shell (no login shell, $SHELL, /bin/bash or /bin/sh): " +
		"sftp and port forwarding still work")
}

func executable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && syscall.Access(path, 1) == nil
}
