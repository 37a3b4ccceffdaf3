// Package localcluster starts, watches and stops `braid server` processes
// on loopback ports, from a braid binary it is given: a cluster of nodes
// on one machine, as `braid demo` shows it (with its own executable) and
// the process-level tests and benchmarks use it (with a binary that
// internal/testutil/braidproc builds). It never builds anything.
//
// A Node is one `braid server` process and its data directory: it can be
// started, stopped (SIGTERM, then SIGKILL), killed, stalled with SIGSTOP
// and started again on the same directory and ports. A Cluster is nodes
// that form one cluster (each joins the others, --bootstrap-expect
// their number); New makes them on free ports (package internal/ports),
// Start also starts them and waits until they formed a cluster. Readiness,
// owners and states are asked of the nodes through package client, in the
// JSON shapes of package api/wire: this package imports no server package.
//
//	c, err := localcluster.Start(ctx, bin, dir, 3)
//	...
//	defer c.Close()
//	err = c.CreateDestination(ctx, spec)
//	owner, epoch, leader, err := c.Owner(ctx, "shop", 30*time.Second)
//	owner.Kill()
//
// # Invariants
//
//   - A Node runs at most one process at a time; its log (LogPath, its
//     data directory + ".log") collects every process's stdout and stderr,
//     each start headed by a line with the command's flags.
//   - On Linux a node's process is killed when the thread of the process
//     that started it ends (Pdeathsig), so a crashed test or demo leaves no
//     node behind.
//   - Kill, Stop and Close return only once the processes they ended are
//     gone.
//
// # Concurrency
//
// Node and Cluster are safe for concurrent use, but for the Cluster's
// Nodes slice and a Node's exported fields, which are set before the
// first Start and read-only after. Each process started has one goroutine
// that waits for it, calls OnExit and ends with the process.
package localcluster
