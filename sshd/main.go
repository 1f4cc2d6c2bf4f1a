// Command gpu-portal-sshd is the SSH server inside every workload that has SSH: the
// portal's authenticating proxy forwards a WebSocket at /.gpu-portal/ssh to it on the pod's
// loopback, and it speaks SSH over that WebSocket. It is also the container's entrypoint
// wrapper: it starts the application as its child, forwards signals and reaps orphans (PID 1).
//
//	gpu-portal-sshd install DEST_DIR                   (the init container: copy this binary)
//	gpu-portal-sshd run [flags] [-- PROGRAM ARGS...]   (the container's entrypoint)
//
// Why these modules and not Debian's openssh-server: openssh-server needs its own files (host
// keys, privilege separation user and directory, a writable /etc) that an arbitrary image run as
// any user under Pod Security "restricted" cannot be assumed to have. This is one static binary
// (pure Go, cgo off) that an init container copies into a shared emptyDir and that runs in any
// image as the workload's own user. Its parts are well kept and pure Go:
// github.com/gliderlabs/ssh (the whole SSH server: authentication, sessions and their requests,
// the sftp subsystem, local forwarding) over golang.org/x/crypto/ssh (the Go team's SSH: the
// certificate checker, the host key), github.com/pkg/sftp (the SFTP server that scp and sftp of
// OpenSSH ≥ 9 use), github.com/creack/pty (PTYs without cgo) and github.com/coder/websocket (the
// WebSocket, as a net.Conn for the SSH server).
//
// No environment variable configures it: the application's environment stays as the user gave
// it, and sessions inherit it.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const usage = `usage:
  gpu-portal-sshd install DEST_DIR
  gpu-portal-sshd run [--listen ADDR] [--config-dir DIR] [--workload ID] [--portal URL]
                      [--check-interval DURATION] [--shell PATH] [-- PROGRAM ARGS...]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "install":
		if len(os.Args) != 3 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		if err := install(os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "gpu-portal-sshd install: %v\n", err)
			os.Exit(1)
		}
	case "run":
		os.Exit(run(os.Args[2:]))
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}

// install copies this executable to dir/gpu-portal-sshd, mode 0555, through a temporary file and
// a rename, so that a repeated install (a restarted init container) replaces it whole.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("reading this executable: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".gpu-portal-sshd-*")
	if err != nil {
		return fmt.Errorf("the copy: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("the copy: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("the copy's mode: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("the copy: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "gpu-portal-sshd")); err != nil {
		return fmt.Errorf("putting the copy in place: %w", err)
	}
	return nil
}
