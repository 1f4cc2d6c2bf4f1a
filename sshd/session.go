package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// session is one session channel: a shell, a command or the sftp subsystem, run as this
// process's own user (the workload's) with the application's environment.
type session struct {
	s    *server
	conn *connection
	ch   gossh.Channel

	env     []string // accepted env requests (LANG, LC_*, TERM)
	pty     *ptyRequest
	ptmx    *os.File
	started bool
	pid     atomic.Int64
	exited  atomic.Bool
	mu      sync.Mutex // ptmx and the window
}

type ptyRequest struct {
	Term                      string
	Columns, Rows, Width, Hgt uint32
	Modes                     string
}

type windowChange struct {
	Columns, Rows, Width, Height uint32
}

func (s *server) sessionChannel(_ *ssh.Server, _ *gossh.ServerConn, nc gossh.NewChannel, ctx ssh.Context) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	c := connOf(ctx)
	c.addChannel(ch)
	defer c.removeChannel(ch)
	sess := &session{s: s, conn: c, ch: ch}
	for req := range reqs {
		ok := sess.handle(req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	// the client closed the channel: hang up on what still runs
	if pid := int(sess.pid.Load()); pid > 0 && !sess.exited.Load() {
		_ = syscall.Kill(-pid, syscall.SIGHUP)
	}
}

func (sess *session) handle(req *gossh.Request) bool {
	switch req.Type {
	case "env":
		var kv struct{ Name, Value string }
		if sess.started || gossh.Unmarshal(req.Payload, &kv) != nil || !acceptedEnv(kv.Name) {
			return false
		}
		sess.env = append(sess.env, kv.Name+"="+kv.Value)
		return true
	case "pty-req":
		var p ptyRequest
		if sess.started || sess.pty != nil || gossh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		if !sess.conn.permits("permit-pty") {
			sess.s.log.Printf("session=%s: terminal refused: the certificate does not permit it", sess.conn.id)
			return false
		}
		sess.pty = &p
		return true
	case "window-change":
		var w windowChange
		if sess.pty == nil || gossh.Unmarshal(req.Payload, &w) != nil {
			return false
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		sess.pty.Columns, sess.pty.Rows = w.Columns, w.Rows
		if sess.ptmx != nil {
			_ = pty.Setsize(sess.ptmx, &pty.Winsize{Rows: uint16(w.Rows), Cols: uint16(w.Columns)})
		}
		return true
	case "shell", "exec":
		var command struct{ Value string }
		if sess.started {
			return false
		}
		if req.Type == "exec" && gossh.Unmarshal(req.Payload, &command) != nil {
			return false
		}
		sess.started = true
		go sess.run(req.Type == "exec", command.Value)
		return true
	case "subsystem":
		var name struct{ Value string }
		if sess.started || gossh.Unmarshal(req.Payload, &name) != nil || name.Value != "sftp" {
			return false
		}
		sess.started = true
		go sess.sftp()
		return true
	case "signal":
		var sig struct{ Name string }
		pid := int(sess.pid.Load())
		if gossh.Unmarshal(req.Payload, &sig) == nil && pid > 0 && !sess.exited.Load() {
			if n, ok := signalNumbers[sig.Name]; ok {
				_ = syscall.Kill(pid, n)
			}
		}
		return true
	}
	return false // x11-req, auth-agent-req@openssh.com and the rest: no
}

func acceptedEnv(name string) bool {
	return name == "LANG" || name == "TERM" || strings.HasPrefix(name, "LC_")
}

// run runs the shell, or `shell -c command`, on a terminal when one was asked for, else on pipes.
func (sess *session) run(isExec bool, command string) {
	shell, err := sess.s.shell()
	if err != nil {
		fmt.Fprintf(sess.ch.Stderr(), "gpu-portal-sshd: %v\r\n", err)
		sess.exit(127, 0)
		return
	}
	argv := []string{"-" + filepath.Base(shell)} // a login shell, as sshd starts it
	if isExec {
		argv = []string{shell, "-c", command}
	}
	home := homeDir()
	dir := home
	if info, err := os.Stat(home); err != nil || !info.IsDir() {
		dir = "/"
	}
	sess.mu.Lock()
	term := ""
	if sess.pty != nil {
		term = sess.pty.Term
	}
	sess.mu.Unlock()
	env := sessionEnv(os.Environ(), sess.env, map[string]string{
		"HOME": home, "USER": sess.conn.user, "LOGNAME": sess.conn.user, "SHELL": shell,
		"GPU_PORTAL_SSH_SESSION": sess.conn.id, "TERM": term})
	attr := &os.ProcAttr{Dir: dir, Env: env, Sys: &syscall.SysProcAttr{Setsid: true}}
	var copies sync.WaitGroup
	var closeAfter []*os.File
	if sess.pty != nil {
		ptmx, tty, err := pty.Open()
		if err != nil {
			fmt.Fprintf(sess.ch.Stderr(), "gpu-portal-sshd: no terminal: %v\r\n", err)
			sess.exit(1, 0)
			return
		}
		sess.mu.Lock()
		sess.ptmx = ptmx
		_ = pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(sess.pty.Rows), Cols: uint16(sess.pty.Columns)})
		sess.mu.Unlock()
		attr.Files = []*os.File{tty, tty, tty}
		attr.Sys.Setctty, attr.Sys.Ctty = true, 0
		defer tty.Close()
		closeAfter = append(closeAfter, ptmx)
		go func() { _, _ = io.Copy(ptmx, sess.ch) }()
		copies.Add(1)
		go func() { defer copies.Done(); _, _ = io.Copy(sess.ch, ptmx) }()
	} else {
		stdin, toStdin, err1 := os.Pipe()
		fromStdout, stdout, err2 := os.Pipe()
		fromStderr, stderr, err3 := os.Pipe()
		for _, err := range []error{err1, err2, err3} {
			if err != nil {
				fmt.Fprintf(sess.ch.Stderr(), "gpu-portal-sshd: %v\r\n", err)
				sess.exit(1, 0)
				return
			}
		}
		attr.Files = []*os.File{stdin, stdout, stderr}
		defer stdin.Close()
		defer stdout.Close()
		defer stderr.Close()
		closeAfter = append(closeAfter, fromStdout, fromStderr, toStdin)
		go func() { _, _ = io.Copy(toStdin, sess.ch); toStdin.Close() }()
		copies.Add(2)
		go func() { defer copies.Done(); _, _ = io.Copy(sess.ch, fromStdout) }()
		go func() { defer copies.Done(); _, _ = io.Copy(sess.ch.Stderr(), fromStderr) }()
	}
	proc, done, err := sess.s.reaper.start(shell, argv, attr)
	for _, f := range attr.Files {
		f.Close() // the child has them now
	}
	if err != nil {
		for _, f := range closeAfter {
			f.Close()
		}
		fmt.Fprintf(sess.ch.Stderr(), "gpu-portal-sshd: cannot start %s: %v\r\n", shell, err)
		sess.exit(127, 0)
		return
	}
	sess.pid.Store(int64(proc.Pid))
	status := <-done
	sess.exited.Store(true)
	_ = proc.Release()
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainAfterExit):
	}
	for _, f := range closeAfter {
		f.Close()
	}
	if status.Signaled() {
		sess.exit(0, status.Signal())
	} else {
		sess.exit(status.ExitStatus(), 0)
	}
}

// sftp serves the sftp subsystem (what scp and sftp of OpenSSH ≥ 9 use) from HOME.
func (sess *session) sftp() {
	dir := homeDir()
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		dir = "/"
	}
	// the channel stays open for the exit status: the SFTP server's Close must not close it
	server, err := sftp.NewServer(keepOpen{sess.ch}, sftp.WithServerWorkingDirectory(dir))
	if err != nil {
		sess.exit(1, 0)
		return
	}
	_ = server.Serve()
	_ = server.Close()
	sess.exit(0, 0)
}

type keepOpen struct{ io.ReadWriter }

func (keepOpen) Close() error { return nil }

// exit tells the client how the session's process ended, then closes the channel.
func (sess *session) exit(code int, sig syscall.Signal) {
	if name, ok := signalNames[sig]; ok {
		_, _ = sess.ch.SendRequest("exit-signal", false, gossh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Message    string
			Lang       string
		}{Signal: name}))
	} else {
		if sig != 0 {
			code = 128 + int(sig)
		}
		_, _ = sess.ch.SendRequest("exit-status", false, gossh.Marshal(struct{ Status uint32 }{uint32(code)}))
	}
	_ = sess.ch.CloseWrite()
	_ = sess.ch.Close()
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
