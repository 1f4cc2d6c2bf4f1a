package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"
)

const (
	wsPath            = "/.gpu-portal/ssh"
	workloadOption    = "workload@gpu-portal"
	keepaliveInterval = 30 * time.Second
	handshakeTimeout  = 30 * time.Second
	shutdownWait      = 10 * time.Second
)

type config struct {
	listen, configDir, workload, portal, shell string
	checkInterval                              time.Duration
}

type server struct {
	cfg     config
	log     *slog.Logger
	reaper  *reaper
	checker *gossh.CertChecker
	portal  *portal // nil without --portal: no reports
	ssh     *ssh.Server
	http    *http.Server

	mu       sync.Mutex
	conns    map[string]*connection // every open connection, admitted or not yet
	stopping bool
	live     sync.WaitGroup // connections being served
	reports  sync.WaitGroup // end reports under way
	stop     chan struct{}
}

// newServer reads the config folder: ca.pub (the trusted user CAs, authorized_keys lines),
// host_key (an OpenSSH private key) and report_token.
func newServer(cfg config, logger *slog.Logger, r *reaper) (*server, error) {
	if cfg.configDir == "" {
		return nil, errors.New("--config-dir is missing")
	}
	if cfg.workload == "" {
		return nil, errors.New("--workload is missing")
	}
	if cfg.checkInterval <= 0 {
		return nil, errors.New("--check-interval must be positive")
	}
	raw, err := os.ReadFile(filepath.Join(cfg.configDir, "ca.pub"))
	if err != nil {
		return nil, fmt.Errorf("the trusted CAs: %w", err)
	}
	var authorities [][]byte
	for rest := raw; len(bytes.TrimSpace(rest)) > 0; {
		var key gossh.PublicKey
		key, _, _, rest, err = gossh.ParseAuthorizedKey(rest)
		if err != nil {
			return nil, fmt.Errorf("ca.pub: %w", err)
		}
		authorities = append(authorities, key.Marshal())
	}
	if len(authorities) == 0 {
		return nil, errors.New("ca.pub holds no key")
	}
	raw, err = os.ReadFile(filepath.Join(cfg.configDir, "host_key"))
	if err != nil {
		return nil, fmt.Errorf("the host key: %w", err)
	}
	hostKey, err := gossh.ParsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("host_key: %w", err)
	}
	s := &server{cfg: cfg, log: logger, reaper: r, conns: map[string]*connection{},
		stop: make(chan struct{})}
	if cfg.portal != "" {
		raw, err = os.ReadFile(filepath.Join(cfg.configDir, "report_token"))
		if err != nil {
			return nil, fmt.Errorf("the report token: %w", err)
		}
		token := strings.TrimSpace(string(raw))
		if token == "" {
			return nil, errors.New("report_token is empty")
		}
		s.portal = newPortal(cfg.portal, token)
	}
	s.checker = &gossh.CertChecker{
		SupportedCriticalOptions: []string{workloadOption},
		IsUserAuthority: func(auth gossh.PublicKey) bool {
			for _, a := range authorities {
				if bytes.Equal(a, auth.Marshal()) {
					return true
				}
			}
			return false
		},
	}
	// gliderlabs/ssh serves the connection whole: authentication (checkKey, then verified once
	// the client proved it holds the key), sessions (its own handler: env, pty-req,
	// window-change, shell, exec, signal, the sftp subsystem), local forwarding (direct-tcpip,
	// under permitForwarding). No tcpip-forward (remote forwarding): no request handler, so
	// every global request is answered no; no channel type but these two is accepted.
	s.ssh = &ssh.Server{
		Version:                     "gpu-portal",
		HostSigners:                 []ssh.Signer{hostKey},
		ConnCallback:                s.connCallback,
		PublicKeyHandler:            s.checkKey,
		ServerConfigCallback:        s.serverConfig,
		Handler:                     s.runSession,
		PtyCallback:                 s.permitTerminal,
		LocalPortForwardingCallback: s.permitForwarding,
		ChannelHandlers: map[string]ssh.ChannelHandler{
			"session":      s.sessionChannel,
			"direct-tcpip": ssh.DirectTCPIPHandler,
		},
		RequestHandlers:   map[string]ssh.RequestHandler{},
		SubsystemHandlers: map[string]ssh.SubsystemHandler{"sftp": s.serveSFTP},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveHTTP)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

func (s *server) serve(l net.Listener) {
	if s.portal != nil {
		go s.checkLoop()
	} else {
		s.log.Warn("no --portal: sessions are admitted on the certificate alone and not reported")
	}
	if err := s.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("the SSH listener stopped", "error", err)
	}
}

// connection is one SSH connection (one WebSocket); id is the session id the portal knows it by.
type connection struct {
	id, from string
	nc       net.Conn
	ctx      ssh.Context

	mu        sync.Mutex
	admitted  bool
	user      string
	cert      *gossh.Certificate
	started   time.Time
	endReason string
	channels  map[gossh.Channel]struct{} // open session channels: where an ending is told
	closed    chan struct{}
}

type trackedConn struct {
	net.Conn
	conn *connection
}

type connKey struct{}

func connOf(ctx ssh.Context) *connection {
	c, _ := ctx.Value(connKey{}).(*connection)
	return c
}

func (c *connection) permits(extension string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return false
	}
	_, ok := c.cert.Permissions.Extensions[extension]
	return ok
}

// end closes the connection for a reason (the first one given is kept), telling each open
// session on its stderr first.
func (c *connection) end(reason, message string) {
	c.mu.Lock()
	if c.endReason == "" {
		c.endReason = reason
	}
	channels := make([]gossh.Channel, 0, len(c.channels))
	for ch := range c.channels {
		channels = append(channels, ch)
	}
	c.mu.Unlock()
	told := make(chan struct{})
	go func() {
		for _, ch := range channels {
			fmt.Fprintf(ch.Stderr(), "\r\ngpu-portal: %s\r\n", message)
		}
		close(told)
	}()
	select {
	case <-told:
	case <-time.After(2 * time.Second): // a client that reads nothing does not hold the end up
	}
	c.nc.Close()
}

func (c *connection) addChannel(ch gossh.Channel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.channels == nil {
		c.channels = map[gossh.Channel]struct{}{}
	}
	c.channels[ch] = struct{}{}
}

func (c *connection) removeChannel(ch gossh.Channel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.channels, ch)
}

func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wsPath {
		http.NotFound(w, r)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	c := &connection{id: newSessionID(), from: clientAddress(r), closed: make(chan struct{})}
	c.nc = websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		ws.Close(websocket.StatusGoingAway, "the workload is stopping")
		return
	}
	s.conns[c.id] = c
	s.live.Add(1)
	s.mu.Unlock()
	defer s.live.Done()
	// a connection that has not authenticated in time is dropped (not a deadline on the conn:
	// gliderlabs/ssh resets those on every read)
	unauthenticated := time.AfterFunc(handshakeTimeout, func() {
		c.mu.Lock()
		admitted := c.admitted
		c.mu.Unlock()
		if !admitted {
			c.nc.Close()
		}
	})
	defer unauthenticated.Stop()
	s.ssh.HandleConn(&trackedConn{Conn: c.nc, conn: c})
	close(c.closed)
	s.finish(c)
}

// clientAddress: the first X-Forwarded-For entry (the authenticating proxy in front sets it),
// else the peer's address.
func clientAddress(r *http.Request) string {
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		if first := strings.TrimSpace(strings.Split(fwd, ",")[0]); first != "" {
			return first
		}
	}
	return r.RemoteAddr
}

func (s *server) connCallback(ctx ssh.Context, nc net.Conn) net.Conn {
	c := nc.(*trackedConn).conn
	c.ctx = ctx
	ctx.SetValue(connKey{}, c)
	return nc
}

// checkKey is the first look at an offered key: an OpenSSH user certificate of a trusted CA,
// valid now, for the user asked for and for this workload. The client has not yet proven it
// holds the key; verified (below) reports to the portal once it has. The principal is compared
// whole with the user asked for (CertChecker): whatever the portal puts there is its own.
func (s *server) checkKey(ctx ssh.Context, key ssh.PublicKey) bool {
	c := connOf(ctx)
	attrs := []any{"session", c.id, "user", ctx.User(), "from", c.from}
	refuse := func(why string) bool {
		s.log.Info("refused", append(attrs, "reason", why)...)
		return false
	}
	cert, ok := key.(*gossh.Certificate)
	if !ok {
		return refuse("a plain key, not a certificate of the portal")
	}
	attrs = append(attrs, "key_id", cert.KeyId, "serial", cert.Serial)
	if cert.CertType != gossh.UserCert {
		return refuse("not a user certificate")
	}
	if !s.checker.IsUserAuthority(cert.SignatureKey) {
		return refuse("the certificate is signed by a CA this workload does not trust")
	}
	if err := s.checker.CheckCert(ctx.User(), cert); err != nil {
		return refuse(strings.TrimPrefix(err.Error(), "ssh: "))
	}
	if got := cert.CriticalOptions[workloadOption]; got != s.cfg.workload {
		return refuse(fmt.Sprintf("the certificate is for workload %q, not %q", got, s.cfg.workload))
	}
	return true
}

func (s *server) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	return &gossh.ServerConfig{
		MaxAuthTries: 6,
		// called once the client has signed with the key checkKey let through
		VerifiedPublicKeyCallback: func(meta gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
			cert, ok := key.(*gossh.Certificate)
			if !ok { // checkKey let only certificates through
				return nil, errors.New("not a certificate")
			}
			return s.verified(ctx, meta.User(), cert, perms)
		},
	}
}

// verified: the client holds the certificate's key. The portal has the last word (start report).
func (s *server) verified(ctx ssh.Context, user string, cert *gossh.Certificate, perms *gossh.Permissions) (*gossh.Permissions, error) {
	c := connOf(ctx)
	attrs := []any{"session", c.id, "user", user, "from", c.from, "key_id", cert.KeyId, "serial", cert.Serial}
	if s.portal != nil {
		allowed, why := s.portal.start(startReport{Session: c.id, User: user, Serial: cert.Serial,
			KeyID: cert.KeyId, From: c.from})
		if !allowed {
			s.log.Info("refused", append(attrs, "reason", why)...)
			return nil, errors.New("refused by the portal")
		}
		if why != nil {
			s.log.Warn("admitted on the certificate alone", "session", c.id, "reason", why)
		}
	}
	c.mu.Lock()
	c.admitted, c.user, c.cert, c.started = true, user, cert, time.Now()
	c.mu.Unlock()
	s.log.Info("session start", attrs...)
	go s.keepalive(c)
	return perms, nil
}

// permitForwarding: local forwarding (ssh -L, -W) to whatever the container reaches, when the
// certificate carries permit-port-forwarding.
func (s *server) permitForwarding(ctx ssh.Context, host string, port uint32) bool {
	c := connOf(ctx)
	if !c.permits("permit-port-forwarding") {
		s.log.Info("port forwarding refused", "session", c.id,
			"target", net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10)),
			"reason", "the certificate does not permit it")
		return false
	}
	return true
}

// permitTerminal: a terminal (pty-req) when the certificate carries permit-pty.
func (s *server) permitTerminal(ctx ssh.Context, _ ssh.Pty) bool {
	c := connOf(ctx)
	if !c.permits("permit-pty") {
		s.log.Info("terminal refused", "session", c.id, "reason", "the certificate does not permit it")
		return false
	}
	return true
}

// keepalive asks the client for a sign of life every 30 s (through proxies that drop idle
// connections), and ends a connection whose peer no longer answers.
func (s *server) keepalive(c *connection) {
	ticker := time.NewTicker(keepaliveInterval)
	defer ticker.Stop()
	pending := false
	answered := make(chan error, 1)
	for {
		select {
		case <-c.closed:
			return
		case err := <-answered:
			pending = false
			if err != nil {
				c.end("connection lost", "the connection was lost")
				return
			}
		case <-ticker.C:
			if pending {
				c.end("connection lost", "the connection was lost")
				return
			}
			sc, ok := c.ctx.Value(ssh.ContextKeyConn).(*gossh.ServerConn)
			if !ok {
				continue
			}
			pending = true
			go func() {
				_, _, err := sc.SendRequest("keepalive@openssh.com", true, nil)
				answered <- err
			}()
		}
	}
}

// finish: a connection is over; log and report its end (without blocking anything).
func (s *server) finish(c *connection) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	c.mu.Lock()
	admitted, user, started, reason := c.admitted, c.user, c.started, c.endReason
	c.mu.Unlock()
	if !admitted {
		return
	}
	if reason == "" {
		reason = "client closed"
	}
	s.log.Info("session end", "session", c.id, "user", user,
		"duration", time.Since(started).Round(time.Second), "reason", reason)
	if s.portal == nil {
		return
	}
	s.reports.Add(1)
	go func() {
		defer s.reports.Done()
		if err := s.portal.end(c.id, reason); err != nil {
			s.log.Warn("the end report did not reach the portal", "session", c.id, "error", err)
		}
	}()
}

// checkLoop asks the portal, every --check-interval while connections are open, which of them
// must end, and ends those. A portal that does not answer keeps them.
func (s *server) checkLoop() {
	ticker := time.NewTicker(s.cfg.checkInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
		open := map[string]*connection{}
		s.mu.Lock()
		for id, c := range s.conns {
			c.mu.Lock()
			if c.admitted {
				open[id] = c
			}
			c.mu.Unlock()
		}
		s.mu.Unlock()
		if len(open) == 0 {
			continue
		}
		ids := make([]string, 0, len(open))
		for id := range open {
			ids = append(ids, id)
		}
		ends, err := s.portal.check(ids)
		if err != nil {
			s.log.Warn("the session check did not reach the portal: sessions kept", "error", err)
			continue
		}
		for id, reason := range ends {
			if c := open[id]; c != nil {
				s.log.Info("the portal ended a session", "session", id, "reason", reason)
				go c.end("access ended: "+reason, "your access to this workload ended: "+reason)
			}
		}
	}
}

// shutdown ends every connection ("workload stopping"), then waits (bounded) for them to finish
// and for their end reports to go out.
func (s *server) shutdown() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	close(s.stop)
	conns := make([]*connection, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	_ = s.http.Close()
	var ending sync.WaitGroup
	for _, c := range conns {
		ending.Add(1)
		go func() {
			defer ending.Done()
			c.end("workload stopping", "the workload is stopping")
		}()
	}
	ending.Wait()
	done := make(chan struct{})
	go func() {
		s.live.Wait()
		s.reports.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownWait):
		s.log.Warn("stopping without every session's end report")
	}
}

// newSessionID: a random UUID (version 4).
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
