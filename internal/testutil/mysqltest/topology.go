package mysqltest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/retry"
)

const (
	// replUser is the account replicas log in to their primary as; it
	// exists on every server of a topology, so any can be promoted.
	replUser     = "repl"
	replPassword = "repl-pw"
	// catchUpTimeout bounds WaitCaughtUp.
	catchUpTimeout = 60 * time.Second
	// relayTimeout bounds how long Promote waits for a replica to apply
	// what it has received.
	relayTimeout = 30 * time.Second
)

// Topology is a MariaDB primary and its replicas, each a Server of its
// own, replicating by GTID (MASTER_USE_GTID=slave_pos) with
// log_slave_updates=ON and gtid_strict_mode=ON, so that any replica can
// be promoted and the others pointed at it, as a failover tool does.
//
// Its methods, like Server's, call t.Fatal and must be called from the
// test's goroutine, one at a time.
type Topology struct {
	// Servers are all the servers in start order: Servers[0] was the
	// first primary. Roles change; the slice does not.
	Servers []*Server

	primary  *Server
	replicas []*Server // replicating from primary, in start order
}

// StartTopology starts a primary and n replicas in parallel (as StartN)
// and returns once every replica replicates from the primary and has
// caught up. Every server has the binary log on (as Start), plus
// log_slave_updates=ON, gtid_strict_mode=ON and its own gtid_domain_id
// (0 for the primary, 1, 2, ... for the replicas; WithDomainID moves the
// base, WithSharedDomain gives all one domain); replicas start with
// read_only=ON. Options apply to every server; WithArgs overrides the
// topology's own settings. MariaDB only: under MySQL the test is
// skipped.
func StartTopology(t testing.TB, n int, opts ...Option) *Topology {
	t.Helper()
	if n < 0 {
		t.Fatalf("mysqltest: StartTopology(%d): want zero or more replicas", n)
	}
	cfg := config{hasDomain: true}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.roleArgs = func(i int) []string {
		args := []string{
			"--log-slave-updates=ON",
			"--loose-gtid-strict-mode=ON",
			"--relay-log=relay",
			// Replicas reconnect at once to a primary that comes back.
			"--loose-master-retry-count=100000",
		}
		if i > 0 {
			args = append(args, "--read-only=ON")
		}
		return args
	}
	servers := startN(t, n+1, &cfg)
	if servers[0].Flavor != "mariadb" {
		t.Skip("mysqltest: StartTopology needs MariaDB (GTID domains, MASTER_USE_GTID)")
	}
	tp := &Topology{Servers: servers, primary: servers[0]}
	// The replication account is created on every server outside the
	// binary log: no GTID of any domain but the primary's data, so a
	// promoted replica sends the others nothing they already have.
	for _, s := range servers {
		s.Exec(t, "SET sql_log_bin = 0",
			"CREATE USER "+quote(replUser)+"@'%' IDENTIFIED BY "+quote(replPassword),
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO "+quote(replUser)+"@'%'",
			"SET sql_log_bin = 1")
	}
	for _, r := range servers[1:] {
		tp.Follow(t, r)
	}
	tp.WaitCaughtUp(t)
	return tp
}

// Primary is the server the replicas replicate from: the first, until
// Promote names another. It may be dead (KillPrimary).
func (tp *Topology) Primary() *Server { return tp.primary }

// Replicas are the servers replicating from Primary, in start order.
func (tp *Topology) Replicas() []*Server { return slices.Clone(tp.replicas) }

// Follow makes s a replica of the current primary (CHANGE MASTER TO ...
// MASTER_USE_GTID=slave_pos; START SLAVE), from the GTID position it
// holds. Promote uses it for the other replicas; a test may use it to
// bring a former primary back as a replica.
func (tp *Topology) Follow(t testing.TB, s *Server) {
	t.Helper()
	if s == tp.primary {
		t.Fatalf("mysqltest: %s is the primary: it cannot follow itself", s.Addr())
	}
	s.Exec(t,
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, "+
			"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			quote(tp.primary.Host), tp.primary.Port, quote(replUser), quote(replPassword)),
		"SET GLOBAL read_only = ON",
		"START SLAVE")
	if !slices.Contains(tp.replicas, s) {
		tp.replicas = append(tp.replicas, s)
		slices.SortFunc(tp.replicas, func(a, b *Server) int {
			return slices.Index(tp.Servers, a) - slices.Index(tp.Servers, b)
		})
	}
}

// WaitCaughtUp waits until each replica (none given: every current
// replica) has applied everything the primary's binary log holds
// (MASTER_GTID_WAIT of the primary's gtid_binlog_pos). It fails the test
// at once if a replica's replication stopped with an error, naming it,
// and after a minute otherwise.
func (tp *Topology) WaitCaughtUp(t testing.TB, replicas ...*Server) {
	t.Helper()
	if len(replicas) == 0 {
		replicas = tp.replicas
	}
	pos := tp.primary.GTIDBinlogPos(t)
	for _, r := range replicas {
		r.waitGTID(t, pos, catchUpTimeout, true)
	}
}

// waitGTID waits until s has applied pos, failing the test after
// timeout, or at once when its replication stopped on an error: an
// applier error, or with ioFatal a receiver that stopped on one (a
// receiver still connecting is waited for).
func (s *Server) waitGTID(t testing.TB, pos string, timeout time.Duration, ioFatal bool) {
	t.Helper()
	var broken error
	err := retry.Wait(context.Background(), timeout, func() error {
		got := s.Query(t, "SELECT MASTER_GTID_WAIT("+quote(pos)+", 0.5)")
		if len(got) == 1 && got[0][0] == "0" {
			return nil
		}
		st := s.ReplicationStatus(t)
		if st.SQLError != "" || ioFatal && st.IOError != "" && st.IORunning == "No" {
			broken = fmt.Errorf("mysqltest: %s: replication stopped: receiver error %q, applier error %q", s.Addr(), st.IOError, st.SQLError)
			return nil
		}
		return fmt.Errorf("mysqltest: %s has applied %s, not yet %s (receiver %s %q, applier %s)",
			s.Addr(), s.Query(t, "SELECT @@gtid_slave_pos")[0][0], pos, st.IORunning, st.IOError, st.SQLRunning)
	})
	if broken != nil {
		t.Fatal(broken)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// StopReplication stops s's replication (STOP SLAVE): it receives and
// applies nothing more until StartReplication.
func (tp *Topology) StopReplication(t testing.TB, s *Server) {
	t.Helper()
	s.Exec(t, "STOP SLAVE")
}

// StartReplication starts s's replication again (START SLAVE), from the
// GTID position it holds.
func (tp *Topology) StartReplication(t testing.TB, s *Server) {
	t.Helper()
	s.Exec(t, "START SLAVE")
}

// KillPrimary kills the primary with SIGKILL, as a crash would. Primary
// still names it until Promote.
func (tp *Topology) KillPrimary(t testing.TB) {
	t.Helper()
	tp.primary.Kill(t)
}

// Promote makes replica r the primary, as a failover tool does: it lets
// r apply what it has received (its relay log), stops its replication
// for good (STOP SLAVE; RESET SLAVE ALL), makes it writable
// (read_only=OFF) and points every other replica at it. The old primary
// is left out of the topology, dead or alive (Follow brings it back).
// Promote does not wait for the others to connect: WaitCaughtUp does,
// and names a replica that cannot (one holding transactions r lacks is
// refused by gtid_strict_mode).
func (tp *Topology) Promote(t testing.TB, r *Server) {
	t.Helper()
	if !slices.Contains(tp.replicas, r) {
		t.Fatalf("mysqltest: Promote(%s): not a replica of %s", r.Addr(), tp.primary.Addr())
	}
	r.Exec(t, "STOP SLAVE IO_THREAD")
	if received := r.ReplicationStatus(t).IOPos; received != "" {
		r.waitGTID(t, received, relayTimeout, false)
	}
	r.Exec(t, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
	tp.primary = r
	others := slices.DeleteFunc(tp.replicas, func(s *Server) bool { return s == r })
	tp.replicas = nil
	for _, s := range others {
		tp.Follow(t, s)
	}
}

// VIP is what stands for a virtual IP in front of a topology: a
// tcpproxy.Proxy (named by its methods here, as tcpproxy's own tests
// import this package).
type VIP interface {
	Pause()
	Switch(addr string)
	Resume()
}

// FailOver is a whole failover behind vip, as a failover tool does it
// under a write load: vip stops forwarding (writes and binlog streams
// through it stall, as when a primary hangs), every replica catches up,
// the primary is SIGKILLed, r is promoted (Promote) and vip moves to it,
// cutting what was open, and forwards again. Whatever was committed on
// the old primary is on r when FailOver returns.
func (tp *Topology) FailOver(t testing.TB, vip VIP, r *Server) {
	t.Helper()
	vip.Pause()
	tp.WaitCaughtUp(t)
	tp.KillPrimary(t)
	tp.Promote(t, r)
	vip.Switch(r.Addr())
	vip.Resume()
}

// ReplicationStatus is the part of SHOW SLAVE STATUS tests look at; all
// empty on a server that is no replica.
type ReplicationStatus struct {
	// IORunning and SQLRunning are Slave_IO_Running ("Yes", "No",
	// "Connecting") and Slave_SQL_Running.
	IORunning, SQLRunning string
	// IOError and SQLError are Last_IO_Error and Last_SQL_Error.
	IOError, SQLError string
	// IOPos is Gtid_IO_Pos: the GTIDs received, applied or not.
	IOPos string
	// Master is the address replicated from: "host:port".
	Master string
}

// ReplicationStatus returns s's SHOW SLAVE STATUS.
func (s *Server) ReplicationStatus(t testing.TB) ReplicationStatus {
	t.Helper()
	c := s.connect(t)
	defer quit(c)
	r, err := c.Execute("SHOW SLAVE STATUS")
	if err != nil {
		t.Fatalf("mysqltest: %s: SHOW SLAVE STATUS: %v", s.Addr(), err)
	}
	defer r.Close()
	if r.RowNumber() == 0 {
		return ReplicationStatus{}
	}
	get := func(name string) string {
		v, err := r.GetStringByName(0, name)
		if err != nil {
			t.Fatalf("mysqltest: %s: SHOW SLAVE STATUS: %s: %v", s.Addr(), name, err)
		}
		return v
	}
	port := get("Master_Port")
	return ReplicationStatus{
		IORunning:  get("Slave_IO_Running"),
		SQLRunning: get("Slave_SQL_Running"),
		IOError:    get("Last_IO_Error"),
		SQLError:   get("Last_SQL_Error"),
		IOPos:      get("Gtid_IO_Pos"),
		Master:     get("Master_Host") + ":" + port,
	}
}

// GTIDBinlogPos is s's @@gtid_binlog_pos: the last GTID of each domain
// in its binary log ("0-100-5,1-101-2"), "" before the first.
func (s *Server) GTIDBinlogPos(t testing.TB) string {
	t.Helper()
	return s.Query(t, "SELECT @@gtid_binlog_pos")[0][0]
}

// PurgeBinlogs starts a new binary log file (FLUSH BINARY LOGS) and
// deletes every one before it, as PurgeLogsTo; it returns the file that
// is left. On a primary, replicas still reading an old file may hold it
// for a moment; PurgeLogsTo waits for that.
func (s *Server) PurgeBinlogs(t testing.TB) string {
	t.Helper()
	s.FlushLogs(t)
	file, _ := s.MasterStatus(t)
	s.PurgeLogsTo(t, file)
	return file
}
