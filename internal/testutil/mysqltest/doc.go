// Package mysqltest starts real MariaDB (or MySQL) servers for tests: each
// Start runs a private mariadbd with the binary log on, on a free loopback
// port and a throw-away data directory, and removes it when the test ends.
// It is a testing.TB wrapper around internal/mariadb, which owns the
// processes and directories.
//
//	src := mysqltest.Start(t)                     // ready to query, binlog ROW/FULL
//	src.Exec(t, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)",
//		"SET timestamp = 1700000000", "INSERT INTO app.t VALUES (1)")
//	file, pos := src.MasterStatus(t)
//	c, err := sqlutf8.Connect(ctx, src.Addr(), "root", "", "", nil) // utf8mb4, as Exec and Query
//
// Servers run as
//
//	mariadbd --no-defaults --log-bin=binlog --binlog-format=ROW
//	         --binlog-row-image=FULL --server-id=N --character-set-server=utf8mb4 ...
//
// plus small InnoDB settings that make start-up fast (see startArgs in
// internal/mariadb/server.go), then whatever WithArgs adds; a later argument overrides an earlier
// one, so WithArgs("--binlog-format=STATEMENT") or WithArgs("--skip-log-bin")
// work. The root user is root@127.0.0.1 with an empty password; CreateUser adds
// a password-protected replication user. Authentication is real: grant tables
// are never skipped. There is no test database; tests create their own.
//
// MakeTLS makes a test CA with a server certificate for 127.0.0.1 and a
// client certificate; WithTLS(files) starts a server with them
// (--ssl-ca/--ssl-cert/--ssl-key), for users created REQUIRE SSL or
// REQUIRE X509.
//
// The first Start in a test process initialises one template data directory
// with mariadb-install-db (about two seconds); every server then gets a copy of
// it, so a Start costs well under a second. If no server binary is found (on
// PATH or in /usr/sbin), Start skips the test, naming the fix (apt-get install
// mariadb-server); with CI=true in the environment it fails the test instead.
// Under go test -short (make test-short) Start skips the test: the short
// tier starts no processes.
//
// StartTopology starts a replication topology for failover tests: a
// primary and n replicas, started in parallel, replicating by GTID
// (MASTER_USE_GTID=slave_pos) with log_slave_updates=ON,
// gtid_strict_mode=ON and each server its own gtid_domain_id (or one
// shared domain, WithSharedDomain):
//
//	tp := mysqltest.StartTopology(t, 2)          // caught up when it returns
//	tp.Primary().Exec(t, "INSERT ...")
//	tp.WaitCaughtUp(t)                           // by GTID, every replica
//	tp.KillPrimary(t)                            // SIGKILL
//	tp.Promote(t, tp.Replicas()[0])              // the others follow it
//	tp.FailOver(t, vip, r)                       // all of it behind a tcpproxy
//	tp.StopReplication(t, r); tp.StartReplication(t, r)
//	first := s.PurgeBinlogs(t)                   // FLUSH, then PURGE ... TO
//
// MariaDB only; under MySQL StartTopology skips the test. StartLoad
// writes one row per interval through an address (a tcpproxy standing in
// for a virtual IP) across a failover, and says which ids were
// committed, which were refused and which are unknown (the connection
// broke before the answer).
//
// MySQL is supported on a best-effort basis (mysqld --initialize-insecure); the
// harness is developed and tested against MariaDB 10.11. Server.Flavor says
// which one is running, spelled like go-mysql's mysql.MariaDBFlavor and
// mysql.MySQLFlavor.
//
// # Invariants
//
//   - A Server returned by Start or StartN answers queries over TCP at Addr and
//     is the process this package started: readiness is checked by asking the
//     server for its own socket path, so a stranger on a recycled port is never
//     mistaken for it.
//   - Servers alive at the same time in one process have distinct ports.
//     Servers started in one process have distinct server ids, counting up
//     from 100, unless WithServerID chooses one.
//   - Every process and directory created for a test is gone when its Cleanup
//     has run: the server is sent SIGTERM, then SIGKILL after a grace period,
//     and its directory is removed. On Linux a server also dies with the test
//     process (Pdeathsig), and directories left by a test process that was
//     killed are removed by a later one.
//   - Restart reuses the port, the data directory and the arguments, so binlog
//     file names and positions continue where they were.
//   - In a Topology, Primary is the server the Replicas replicate from;
//     Promote moves that role and re-points every other replica, leaving
//     the old primary out. The replication account exists on every
//     server outside the binary log, so no server's binlog holds a
//     transaction of its own domain until a test writes one.
//   - Exec runs all its statements in one session, so session state such as
//     SET timestamp applies to the statements after it.
//
// # Concurrency
//
// Start, StartN and the Server methods follow the rules of testing.TB: they
// call t.Fatal and so must be called from the goroutine running the test (use
// StartN, not a goroutine per Start, to start servers in parallel). Different
// Servers are independent and may be used from parallel tests. A Server's
// methods must not be called concurrently with each other.
//
// A Load owns one goroutine, which Stop (or the test's end) ends and
// waits for; its methods are safe for concurrent use.
//
// While a server runs, internal/mariadb owns one goroutine waiting for its
// process to exit; it ends when the server is stopped or killed, at the latest
// in the test's Cleanup. With go.uber.org/goleak, check for leaks in TestMain
// (goleak.VerifyTestMain) or in a Cleanup registered before Start, not in a
// defer, which runs before Cleanup.
package mysqltest
