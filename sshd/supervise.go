package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The signals a container runtime or a person sends that the application must get.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2}

// run is `gpu-portal-sshd run`: serve SSH and supervise the program; its result is the exit code.
func run(args []string) int {
	logger := newLogger(os.Stderr)
	flagArgs, program := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			flagArgs, program = args[:i], args[i+1:]
			break
		}
	}
	cfg := config{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:4182", "address of the HTTP server whose path "+wsPath+" takes the WebSocket")
	fs.StringVar(&cfg.configDir, "config-dir", "", "folder with ca.pub, host_key and report_token")
	fs.StringVar(&cfg.workload, "workload", "", "the workload's id: certificates must carry it in their workload@gpu-portal option")
	fs.StringVar(&cfg.portal, "portal", "", "the portal's base URL; session reports go to URL/api/v1/ssh-sessions/")
	fs.DurationVar(&cfg.checkInterval, "check-interval", 30*time.Second, "how often the portal is asked whether open sessions may go on")
	fs.StringVar(&cfg.shell, "shell", "", "the sessions' shell (default: the user's login shell, $SHELL, /bin/bash, /bin/sh)")
	flagErr := fs.Parse(flagArgs)
	if flagErr == nil && program == nil && fs.NArg() > 0 {
		program = fs.Args()
	}

	// before anything starts: the signals are ours to forward, and every child is reaped here
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, forwarded...)
	reaper := newReaper()

	var srv *server
	err := flagErr
	if err == nil {
		srv, err = newServer(cfg, logger, reaper)
	}
	var listener net.Listener
	if err == nil {
		if listener, err = net.Listen("tcp", cfg.listen); err != nil {
			err = fmt.Errorf("--listen: %w", err)
		}
	}
	if err != nil {
		if program == nil {
			logger.Error("cannot serve SSH", "error", err)
			return 1
		}
		logger.Error("SSH is unavailable in this workload (the application runs all the same)", "error", err)
		srv = nil
	} else {
		go srv.serve(listener)
		logger.Info("serving SSH over WebSocket", "url", fmt.Sprintf("http://%s%s", listener.Addr(), wsPath),
			"workload", cfg.workload)
	}
	stopSSH := func() {
		if srv != nil {
			srv.shutdown()
		}
	}

	if program == nil {
		for sig := range signals {
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				stopSSH()
				return 0
			}
		}
	}

	path, err := exec.LookPath(program[0])
	var proc *os.Process
	var done <-chan syscall.WaitStatus
	if err == nil {
		proc, done, err = reaper.start(path, program, &os.ProcAttr{
			Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	}
	if err != nil {
		logger.Error("cannot start the program", "program", program[0], "error", err)
		stopSSH()
		return 127
	}
	for {
		select {
		case sig := <-signals:
			if err := proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				logger.Warn("a signal did not reach the program", "signal", sig.String(), "error", err)
			}
		case status := <-done:
			stopSSH()
			_ = proc.Release()
			return exitCode(status)
		}
	}
}

// newLogger: one structured line per event on stderr (log/slog's key=value text), marked as
// this program's with logger=gpu-portal-sshd, since the application's own output shares the
// stream. No time: the container runtime stamps every line of a pod's log.
func newLogger(w io.Writer) *slog.Logger {
	handler := slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	return slog.New(handler).With("logger", "gpu-portal-sshd")
}

func exitCode(status syscall.WaitStatus) int {
	if status.Signaled() {
		return 128 + int(status.Signal())
	}
	return status.ExitStatus()
}

// reaper is the one place that waits for children: the program, the sessions' processes, and
// (as PID 1 of the container) every orphan that the kernel hands to this process, like tini.
// Nothing else may wait (no exec.Cmd.Wait), or it would race the reaper for a status.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
}

func newReaper() *reaper {
	r := &reaper{waiting: map[int]chan syscall.WaitStatus{}}
	sigchld := make(chan os.Signal, 16)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go func() {
		for range sigchld {
			r.reap()
		}
	}()
	return r
}

func (r *reaper) reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		waiter := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if waiter != nil {
			waiter <- status
		}
	}
}

// start starts a process and gives the channel its wait status arrives on. The lock is held
// from before the start to the registration, so the reaper cannot lose an early exit.
func (r *reaper) start(path string, argv []string, attr *os.ProcAttr) (*os.Process, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	proc, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return nil, nil, err
	}
	waiter := make(chan syscall.WaitStatus, 1)
	r.waiting[proc.Pid] = waiter
	return proc, waiter, nil
}
