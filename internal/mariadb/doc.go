// Package mariadb runs throw-away MariaDB (or MySQL) servers with the binary
// log on: Launch starts a private mariadbd on a loopback port with a fresh
// data directory, and Remove stops it and deletes everything. braid uses it
// for `braid capture --sandbox` and `braid demo`; internal/testutil/mysqltest wraps it
// for tests.
//
//	srv, err := mariadb.Launch(ctx, mariadb.Options{ServerID: 1})
//	if err != nil { ... }                  // errors.Is(err, mariadb.ErrNoServer): not installed
//	defer srv.Remove()
//	err = srv.Exec("CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
//	c, err := sqlutf8.Connect(ctx, srv.Addr(), "root", "", "", nil) // utf8mb4, as Exec
//
// The server binary is mariadbd, else mysqld, on PATH or in /usr/sbin; without
// one Launch fails with ErrNoServer, whose message names the fix (apt-get
// install mariadb-server). Servers run as
//
//	mariadbd --no-defaults --log-bin=binlog --binlog-format=ROW
//	         --binlog-row-image=FULL --server-id=N --character-set-server=utf8mb4 ...
//
// plus small InnoDB settings that make start-up fast (see startArgs in
// server.go), then Options.Args; a later argument overrides an earlier one,
// so Args: []string{"--skip-log-bin"} works. The root user is root@127.0.0.1
// with an empty password. Authentication is real: grant tables are never
// skipped. There is no test database.
//
// Each server lives in its own directory, Server.Dir: data/ (DataDir, with
// the binary logs), tmp/ (a private --tmpdir), sock (Socket), error.log
// (ErrorLog), pid and lock.
//
// The first Launch in a process initialises one template data directory with
// mariadb-install-db (about two seconds); every server then gets a copy of
// it, so a Launch costs well under a second. Prepare does that first part
// ahead of time; RemoveTemplate deletes the template once a process needs no
// more servers.
//
// MySQL is supported on a best-effort basis (mysqld --initialize-insecure);
// the package is developed and tested against MariaDB 10.11. Server.Flavor
// says which one is running, spelled like go-mysql's mysql.MariaDBFlavor and
// mysql.MySQLFlavor.
//
// # Invariants
//
//   - A Server returned by Launch answers queries over TCP at Addr and is the
//     process this package started: readiness is checked by asking the server
//     for its own socket path, so a stranger on a recycled port is never
//     mistaken for it.
//   - Servers of one process that are alive at the same time (launched and
//     not removed) have distinct ports.
//   - Launch leaves nothing behind when it fails; Remove leaves nothing
//     behind when it succeeds. On Linux a server also dies with the process
//     that launched it (Pdeathsig), and directories in the system temp
//     directory left by a process that died are removed by a later one: each
//     is locked (flock on its "lock" file) while in use.
//   - Restart reuses the port, the data directory and the arguments, so binlog
//     file names and positions continue where they were.
//   - Exec runs all its statements in one session, so session state such as
//     SET timestamp applies to the statements after it.
//
// # Concurrency
//
// Launch, Prepare and RemoveTemplate may be called from any goroutine. A Server's
// exported fields and Addr never change after Launch. Stop, Kill, Restart and
// Remove may be called from any goroutine and are serialised: a Kill waits
// for a Stop in progress. Exec opens its own session and is safe
// for concurrent use; it fails while the server is stopped.
//
// While a server runs, the package owns one goroutine that waits for its
// process to exit (and, with Options.Log, the copying of its output); it ends
// when the server is stopped, killed or removed.
package mariadb
