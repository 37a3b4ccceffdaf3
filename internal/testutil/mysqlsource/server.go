package mysqlsource

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/server"
)

// Config says which MySQL the server plays. The zero Config is a MySQL
// 8.4.3 with user root and an empty password, server_id 1.
type Config struct {
	// Version is @@version and the handshake's version, and picks the
	// personality: what the statements, variables and plugins of that
	// version are. Default: Version84 ("8.4.3").
	Version string
	// ServerID is @@server_id and the server id of the events the server
	// makes up (ROTATE, HEARTBEAT). Default: 1.
	ServerID uint32
	// ServerUUID is @@server_uuid; a GTID dump asking for more of this
	// uuid than the binlog holds is refused as MySQL refuses it. Default:
	// a uuid derived from ServerID.
	ServerUUID string
	// Users may log in; default one, root with an empty password.
	Users []User
	// ColdAuthCache leaves caching_sha2_password's cache empty at the
	// start, as after a server restart: a client must then authenticate
	// in full (over TLS, or with the server's RSA key) before the fast
	// path works. Default: warm, as a server the users have logged in to.
	ColdAuthCache bool
	// Logger gets one line per connection and per unknown query; nil
	// discards.
	Logger *slog.Logger
}

// User is an account. Plugin is caching_sha2_password (the default) or
// mysql_native_password, which 8.4 has only after EnableNativePassword
// (--mysql-native-password=ON) and 9.x not at all.
type User struct {
	Name, Password string
	Plugin         string
	// Grants are the user's privileges on *.*, as SHOW GRANTS names
	// them ("REPLICATION SLAVE", "SELECT", "ALL PRIVILEGES"). Default:
	// every privilege for root; REPLICATION SLAVE, REPLICATION CLIENT and
	// SELECT (what braid asks of a source's user) for anyone else. The
	// server enforces REPLICATION SLAVE for a dump and REPLICATION
	// CLIENT for the binlog status statements, as MySQL does.
	Grants []string
}

// rootPrivileges are the static privileges SHOW GRANTS lists for a MySQL
// 8 root.
const rootPrivileges = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, " +
	"SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, CREATE VIEW, " +
	"SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER, CREATE TABLESPACE, CREATE ROLE, DROP ROLE"

// grants returns u's privileges on *.*, defaults filled.
func (u User) grants() []string {
	switch {
	case u.Grants != nil:
		return u.Grants
	case u.Name == "root":
		return strings.Split(rootPrivileges, ", ")
	}
	return []string{"SELECT", "REPLICATION SLAVE", "REPLICATION CLIENT"}
}

// showGrants is SHOW GRANTS for u, as MySQL 8 prints it.
func (u User) showGrants() []string {
	to := " ON *.* TO " + quoteIdent(u.Name) + "@`%`"
	g := u.grants()
	if len(g) == 0 {
		return []string{"GRANT USAGE" + to}
	}
	if u.Grants == nil && u.Name == "root" {
		return []string{"GRANT " + rootPrivileges + to + " WITH GRANT OPTION",
			"GRANT BACKUP_ADMIN,BINLOG_ADMIN,CONNECTION_ADMIN,REPLICATION_APPLIER,SYSTEM_VARIABLES_ADMIN,XA_RECOVER_ADMIN" + to + " WITH GRANT OPTION",
			"GRANT PROXY ON ``@`` TO " + quoteIdent(u.Name) + "@`%` WITH GRANT OPTION"}
	}
	return []string{"GRANT " + strings.Join(g, ", ") + to}
}

// hasPrivilege tells whether user holds priv on *.* (ALL PRIVILEGES
// holds every one).
func (s *Server) hasPrivilege(user, priv string) bool {
	s.auth.mu.Lock()
	u, ok := s.auth.users[user]
	s.auth.mu.Unlock()
	if !ok {
		return false
	}
	for _, g := range u.grants() {
		if g = strings.ToUpper(strings.TrimSpace(g)); g == priv || g == "ALL PRIVILEGES" || g == "ALL" ||
			priv == "REPLICATION SLAVE" && g == "REPLICATION REPLICA" {
			return true
		}
	}
	return false
}

// denied is MySQL's error 1227 for a statement that needs priv.
func denied(priv string) error {
	return mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, "Access denied; you need (at least one of) the "+priv+" privilege(s) for this operation")
}

// Server is a MySQL server for tests; see the package doc.
type Server struct {
	cfg  Config
	p    personality
	ln   net.Listener
	srv  *server.Server
	tls  *tls.Config
	log  *slog.Logger
	auth *authHandler

	mu       sync.Mutex
	closed   bool
	globals  map[string]string // global values of system variables
	vars     map[string]sysvar
	files    []*binlogFile
	executed gtidSet
	changed  chan struct{} // closed and replaced whenever the binlog changes
	catalog  Catalog
	sessions map[uint32]*session
	raw      map[net.Conn]struct{} // every open client socket, closed by Close
	replicas map[uint32]Replica
	unknown  []string

	done chan struct{}
	wg   sync.WaitGroup
}

// Replica is a client that registered as a replica (COM_REGISTER_SLAVE)
// and is connected.
type Replica struct {
	ServerID uint32
	Host     string
	Port     uint16
	UUID     string // its @replica_uuid (@slave_uuid)
}

// Start starts a server for the test, stopped when the test ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a server listening on a free loopback port; Close stops it.
func New(cfg Config) (*Server, error) {
	if cfg.Version == "" {
		cfg.Version = Version84
	}
	p, err := parsePersonality(cfg.Version)
	if err != nil {
		return nil, err
	}
	if cfg.ServerID == 0 {
		cfg.ServerID = 1
	}
	if cfg.ServerUUID == "" {
		cfg.ServerUUID = fmt.Sprintf("%08x-0000-4000-8000-00000000a8a8", cfg.ServerID)
	}
	if _, err := parseSID(cfg.ServerUUID); err != nil {
		return nil, fmt.Errorf("mysqlsource: ServerUUID: %w", err)
	}
	if len(cfg.Users) == 0 {
		cfg.Users = []User{{Name: "root"}}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auth := &authHandler{p: p, users: map[string]User{}}
	for _, u := range cfg.Users {
		if err := auth.add(u); err != nil {
			return nil, err
		}
	}
	tlsConf, err := serverTLS()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, p: p, ln: ln, tls: tlsConf, log: log, auth: auth,
		globals:  map[string]string{},
		executed: gtidSet{},
		changed:  make(chan struct{}),
		sessions: map[uint32]*session{},
		raw:      map[net.Conn]struct{}{},
		replicas: map[uint32]Replica{},
		done:     make(chan struct{}),
	}
	auth.mu.Lock()
	auth.s = s
	auth.mu.Unlock()
	s.vars = p.sysvars(cfg.ServerID, cfg.ServerUUID, ln.Addr().(*net.TCPAddr).Port)
	for name, v := range s.vars {
		s.globals[name] = v.def
	}
	// MySQL 8 greets with utf8mb4_0900_ai_ci (255) and
	// caching_sha2_password; the RSA key of the TLS certificate serves
	// the full authentication of clients without TLS.
	s.srv = server.NewServer(p.version, 255, mysql.AUTH_CACHING_SHA2_PASSWORD, nil, tlsConf)
	s.wg.Add(1)
	go s.accept()
	if !cfg.ColdAuthCache {
		if err := s.warmAuthCache(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Version is the version the server plays.
func (s *Server) Version() string { return s.p.version }

// ServerUUID is @@server_uuid.
func (s *Server) ServerUUID() string { return s.cfg.ServerUUID }

// Close stops the server: the listener, then every connection, and waits
// for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	for _, c := range s.sessions {
		c.kill()
	}
	for nc := range s.raw {
		nc.Close() // connections still in their handshake
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// warmAuthCache logs every caching_sha2_password user in once over TLS,
// which leaves the password's hash in the server's cache as any full
// authentication does on a real server: later clients without TLS then
// take the fast path, which proves the password without sending it.
func (s *Server) warmAuthCache() error {
	for _, u := range s.cfg.Users {
		if u.Plugin != "" && u.Plugin != mysql.AUTH_CACHING_SHA2_PASSWORD || u.Password == "" {
			continue
		}
		c, err := client.Connect(s.Addr(), u.Name, u.Password, "", func(c *client.Conn) error {
			c.SetTLSConfig(s.ClientTLS())
			return nil
		})
		if err != nil {
			return fmt.Errorf("mysqlsource: warm the authentication cache for %s: %w", u.Name, err)
		}
		c.Close()
	}
	return nil
}

// FlushAuthCache empties caching_sha2_password's cache, as FLUSH
// PRIVILEGES or a restart does.
func (s *Server) FlushAuthCache() {
	for _, u := range s.cfg.Users {
		s.srv.InvalidateCache(u.Name, s.Addr())
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(nc)
		}()
	}
}

// serve runs one client connection until it ends.
func (s *Server) serve(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.raw[nc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.raw, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	c := &session{s: s, nc: nc, vars: map[string]string{}, user: map[string]any{}, dead: make(chan struct{})}
	conn, err := s.srv.NewCustomizedConn(nc, s.auth, c)
	if err != nil {
		s.log.Debug("handshake failed", "err", err)
		nc.Close()
		return
	}
	c.conn = conn
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.sessions[conn.ConnectionID()] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, conn.ConnectionID())
		if c.replica != nil {
			delete(s.replicas, c.replica.ServerID)
		}
		s.mu.Unlock()
	}()
	for !conn.Closed() {
		if err := conn.HandleCommand(); err != nil {
			return
		}
	}
}

// Unknown lists the statements the server did not know, in the order
// they came: each was answered with MySQL's error for a statement it
// does not support (1235), so a test can show that braid sends none.
// Unknown protocol commands are listed as "command 0x..", answered with
// error 1047 (unknown command).
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unknown)
}

// Replicas lists the connected clients that registered as replicas.
func (s *Server) Replicas() []Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Replica, 0, len(s.replicas))
	for _, r := range s.replicas {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Replica) int { return int(a.ServerID) - int(b.ServerID) })
	return out
}

// SetVariable sets a global system variable as the server's
// configuration would (read-only ones too), e.g.
// SetVariable("binlog_row_image", "MINIMAL"). Setting gtid_executed adds
// to what the binlog holds; gtid_purged replaces what the oldest file's
// PREVIOUS_GTIDS says.
func (s *Server) SetVariable(name, value string) error {
	name = strings.ToLower(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vars[name]
	if !ok {
		return fmt.Errorf("mysqlsource: %s has no system variable %s", s.p.version, name)
	}
	if v.kind == kindBool {
		w, ok := boolWord(value)
		if !ok {
			return fmt.Errorf("mysqlsource: %s is ON or OFF, not %q", name, value)
		}
		value = w
	}
	if name == "gtid_executed" || name == "gtid_purged" {
		if _, err := parseGTIDSet(value); err != nil {
			return fmt.Errorf("mysqlsource: %s: %w", name, err)
		}
	}
	s.globals[name] = value
	return nil
}

// Variable is a global system variable's value as SHOW GLOBAL VARIABLES
// prints it.
func (s *Server) Variable(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.globalLocked(strings.ToLower(name))
	return v, ok
}

// globalLocked is a global variable's value, gtid sets computed.
func (s *Server) globalLocked(name string) (string, bool) {
	switch name {
	case "gtid_executed":
		return s.gtidExecutedLocked().format(",\n"), true
	case "gtid_purged":
		return s.gtidPurgedLocked().format(",\n"), true
	}
	v, ok := s.globals[name]
	return v, ok
}

// authHandler holds the accounts, as go-mysql's server asks for them.
type authHandler struct {
	s     *Server // for its settings; nil while New builds it
	p     personality
	mu    sync.Mutex
	users map[string]User
	// NativePassword loads mysql_native_password on 8.4
	// (--mysql-native-password=ON).
	nativeOn bool
}

func (a *authHandler) add(u User) error {
	switch u.Plugin {
	case "":
		u.Plugin = mysql.AUTH_CACHING_SHA2_PASSWORD
	case mysql.AUTH_CACHING_SHA2_PASSWORD:
	case mysql.AUTH_NATIVE_PASSWORD:
		if !a.p.hasNativePassword() {
			return fmt.Errorf("mysqlsource: user %s: MySQL %s has no mysql_native_password plugin", u.Name, a.p.version)
		}
	default:
		return fmt.Errorf("mysqlsource: user %s: plugin %q: want caching_sha2_password or mysql_native_password", u.Name, u.Plugin)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[u.Name] = u
	return nil
}

// GetCredential implements server.AuthenticationHandler.
func (a *authHandler) GetCredential(name string) (server.Credential, bool, error) {
	a.mu.Lock()
	u, ok := a.users[name]
	nativeOn := a.nativeOn
	a.mu.Unlock()
	if !ok {
		return server.Credential{}, false, nil
	}
	if u.Plugin == mysql.AUTH_NATIVE_PASSWORD && !a.p.nativePasswordByDefault() && !nativeOn {
		// 8.4 ships the plugin disabled; the account exists but cannot
		// log in.
		return server.Credential{}, false, mysql.NewDefaultError(mysql.ER_PLUGIN_IS_NOT_LOADED, mysql.AUTH_NATIVE_PASSWORD)
	}
	return server.Credential{Passwords: []string{u.Password}, AuthPluginName: u.Plugin}, true, nil
}

// OnAuthSuccess implements server.AuthenticationHandler: with
// require_secure_transport=ON a client without TLS is refused, as MySQL
// refuses it once the password checked out.
func (a *authHandler) OnAuthSuccess(c *server.Conn) error {
	if a.s == nil {
		return nil
	}
	a.s.mu.Lock()
	required := a.s.globals["require_secure_transport"] == "ON"
	a.s.mu.Unlock()
	if _, tlsOn := c.Conn.Conn.(*tls.Conn); required && !tlsOn {
		return mysql.NewError(errSecureTransportRequired, "Connections using insecure transport are prohibited while --require_secure_transport=ON.")
	}
	return nil
}

// errSecureTransportRequired is ER_SECURE_TRANSPORT_REQUIRED.
const errSecureTransportRequired = 3159

// OnAuthFailure implements server.AuthenticationHandler.
func (a *authHandler) OnAuthFailure(*server.Conn, error) {}

// EnableNativePassword loads mysql_native_password on an 8.4 server, as
// --mysql-native-password=ON does (8.0 has it loaded, 9.x has none).
func (s *Server) EnableNativePassword() {
	s.auth.mu.Lock()
	s.auth.nativeOn = true
	s.auth.mu.Unlock()
}
