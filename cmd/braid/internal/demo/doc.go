// Package demo is braid demo: three MariaDB shard servers, a three-node
// braid cluster (braid server processes, through internal/localcluster),
// a live order workload and its merged stream, all on this machine, with
// a takeover to watch. cmd/braid parses the flags into Options and calls
// Run; the demo is a package of its own because it is a program of its
// own (it starts processes, narrates, and checks what it streamed), not a
// part of the command line.
//
// # Concurrency
//
// Run owns every process and goroutine it starts: the shard servers, the
// nodes, the workload's goroutine and the consumer's stream. It sets them
// up, watches them on its own goroutine, and stops them all before it
// returns, whether it succeeded or not.
package demo
