// Command gpu-portal-files is the file server of a project's volumes: one pod per project,
// started by the portal when someone opens a volume's files and stopped when no one has for a
// while. The portal forwards each request of its files API here, adding the bearer token this
// server was started with; nothing else is trusted.
//
//	gpu-portal-files --root /volumes --token-file /etc/gpu-portal-files/token [--listen :8080]
//	                 [--max-upload-bytes N]
//
// Each volume is a folder of the root, named by its claim (/volumes/<claim>), and every path
// of a request is a path inside one volume: it is opened through an os.Root of that volume's
// folder, so `..`, absolute paths and symbolic links that point out of the volume are refused
// by construction, not by checking names.
//
// The standard library only: net/http serves, ranges and streams; os.Root confines.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const shutdownWait = 20 * time.Second

type config struct {
	listen, root, tokenFile string
	maxUpload               int64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		logger.Error("bad arguments", "error", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, logger, nil); err != nil {
		logger.Error("the file server stopped", "error", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("gpu-portal-files", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", ":8080", "the address to serve on")
	fs.StringVar(&cfg.root, "root", "/volumes", "the folder holding one folder per volume")
	fs.StringVar(&cfg.tokenFile, "token-file", "", "a file holding the bearer token every request must carry")
	fs.Int64Var(&cfg.maxUpload, "max-upload-bytes", 0, "the largest upload (0: no limit but the volume's)")
	if err := fs.Parse(args); err != nil {
		return cfg, fmt.Errorf("parsing the flags: %w", err)
	}
	if fs.NArg() != 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if cfg.tokenFile == "" {
		return cfg, errors.New("--token-file is missing")
	}
	return cfg, nil
}

// readToken reads the bearer token: the whole file less surrounding white space, never empty.
func readToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("the token file %s is empty", path)
	}
	return token, nil
}

// serve runs the server until ctx ends, then lets the requests under way finish (at most
// shutdownWait). ready, when given, receives the address once it listens.
func serve(ctx context.Context, cfg config, logger *slog.Logger, ready chan<- string) error {
	token, err := readToken(cfg.tokenFile)
	if err != nil {
		return err
	}
	h, err := newHandler(cfg.root, token, cfg.maxUpload, logger)
	if err != nil {
		return err
	}
	defer h.close()
	listener, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.listen, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("serving", "address", listener.Addr().String(), "root", cfg.root)
	if ready != nil {
		ready <- listener.Addr().String()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(listener) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("stopping: letting the requests under way finish")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	logger.Info("stopped")
	return nil
}
