module gpu-portal.local/sshd

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/creack/pty v1.1.24
	github.com/gliderlabs/ssh v0.3.8
	github.com/pkg/sftp v1.13.12
	golang.org/x/crypto v0.59.0
)

require (
	github.com/anmitsu/go-shlex v0.0.0-20200514113438-38f4b401e2be // indirect
	github.com/kr/fs v0.1.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
