// Package bench measures braid against a peer reading the same binlog in the
// same run: go-mysql's canal package, the library most Go change data capture
// tools are built on. Results are ratios and peaks measured side by side, never
// absolute times compared with a constant, so they mean the same on a laptop
// and on a loaded CI machine.
//
// The package holds the workload generator (Generate, in workload.go), the two
// decoders under test (DecodeBraid and DecodeCanal, in decoders.go), their
// multi-source forms and the merged reader (DecodeBraidEach, DecodeCanalEach
// and MergeBraid, in merge.go), the store filler and the two consumers
// (FillStore, ConsumeCanal and ConsumeNative, in consume.go), the runner
// of a built `braid capture` (CaptureSpec, CountCapture and RunCapture, in
// capture.go), the initial snapshot's ways (SnapshotBraid, SnapshotDump
// and SnapshotCanal, in snapshot.go) and a heap sampler (heap.go); the
// benchmarks themselves are in decode_test.go (BenchmarkDecode),
// mysql8_decode_test.go (BenchmarkMySQLDecode: BenchmarkDecode's two
// decoders on a MySQL 8.4 history served by the MySQL test source, plain
// and compressed; the fixture in mysql8.go),
// merge_test.go (BenchmarkMerge),
// capture_test.go (BenchmarkCapture: `braid capture | wc -l` beside
// go-mysql canal on BenchmarkMerge's binlogs), consume_test.go
// (BenchmarkConsume), catchup_test.go (BenchmarkMerge/catch-up: the
// merged stream delivered to a Go client and to canal-go beside go-mysql
// canal and mariadb-binlog), latency_test.go (BenchmarkLatency: commit-to-consumer
// latency under a steady load), cluster_test.go (BenchmarkCluster: the
// failover gap of a three-node cluster and a node's CPU and memory),
// source_failover_test.go (BenchmarkSourceFailover: the gap from a
// source's failover, behind a proxy or with an address list, to the
// first row from the new server),
// raftstore_test.go (BenchmarkRaftCursors), shardddl_test.go
// (BenchmarkShardDDLHeld: 1 GiB of rows through a 16 MiB store while a
// shard-DDL lock holds one shard table, the live heap against the
// destination's memory bound) and snapshot_test.go (BenchmarkSnapshot:
// the initial snapshot of four shards' tables, 2M rows, beside
// mariadb-dump and go-mysql canal's dump path, and braid's heap at two
// table sizes); each documents what it measures at its top. Every
// benchmark also adds its totals to one table (Record,
// report.go), printed when the run ends and, under `make bench`, written to
// bench/results.json. A rate over repeated runs (rows/s) is their median;
// CPU per row is the runs' CPU over their rows.
//
// # What BenchmarkDecode measures
//
// The benchmark starts one MariaDB (internal/testutil/mysqltest; without a server
// binary it is skipped) and writes one binlog into it, once per process:
// 540,000 row changes (about 69 MiB of binlog) in 600 multi-row transactions
// over six tables with mixed column types (signed and unsigned integers,
// DECIMAL, DOUBLE, FLOAT, CHAR and utf8mb4 VARCHAR with emoji, DATE,
// DATETIME(6), TIMESTAMP(3), ENUM, SET, JSON, BINARY, VARBINARY, BLOB,
// NULLs): shop_0.orders, shop_0.order_items, shop_1.orders,
// shop_1.order_items, noise.events and noise.log. Of each 2,700 row
// changes, 2,400 are inserts, 200 updates and 100 deletes, in three
// transactions. Half of the row changes are in the noise schema, which the
// table filter `shop_\d+\..*` excludes, so each decoder must skip them
// without decoding them; a third of the transactions touch only noise
// tables. The binlog rotates every 16 MiB, so reading it crosses files. The
// generation time is logged.
//
// Each decoder then reads that binlog from its first byte to the end
// position SHOW MASTER STATUS gave after generation, as a user reading with
// `start: earliest` would, and counts the selected row changes it delivers
// (an UPDATE counts once, not as its two images):
//
//   - braid: binlog.Reader with the table filter, its Run emitting change
//     Events to a callback that counts EventRows' rows and stops at the first
//     transaction boundary at or after the end position. The time includes
//     everything Run does before streaming (connect, server checks, schema
//     load).
//   - canal: canal.NewCanal with IncludeTableRegex of the same pattern, no
//     mysqldump, RunFrom the first binlog file at position 4, a handler whose
//     OnRow counts rows and whose OnPosSynced stops at the end position.
//     Canal's defaults are kept (its 10,240-event read-ahead channel included),
//     as a user of canal would run it.
//
// Both must count exactly the row changes the generator wrote to selected
// tables; a difference fails the benchmark. This is a correctness check, not
// a timing assertion.
//
// Sub-benchmarks:
//
//   - BenchmarkDecode/braid-vs-canal: per iteration both decoders read the
//     whole binlog, alternating which goes first. Reported: braid-rows/s and
//     canal-rows/s (selected row changes delivered per second of wall time,
//     over all iterations), ratio (braid/canal; above 1 braid is faster), and
//     braid-peak-heap-MiB and canal-peak-heap-MiB (the highest Go heap in use,
//     runtime/metrics heap objects + unused spans, sampled every 10 ms while
//     each decoder ran, after a GC before it started). ns/op is suppressed:
//     an iteration is two decoders, so its time means nothing alone.
//   - BenchmarkDecode/heap-by-length: per iteration each decoder reads the
//     first half of the binlog, then the whole. Reported: the peak heap of
//     each run (braid-half-peak-heap-MiB, braid-whole-peak-heap-MiB and the
//     same for canal). A decoder whose memory is bounded shows about the same
//     peak for both; one that accumulates shows the whole at about twice the
//     half. The verdict is logged; heap is not asserted, since a GC's timing
//     moves a sampled peak by a few MiB.
//
// Each sub-benchmark logs a one-line human summary; braid-vs-canal also logs
// each iteration, with how long each decoder took to deliver its first row
// (its start-up cost, included in its rows/s).
//
// # What BenchmarkMerge measures
//
// The benchmark starts four MariaDB servers and, once per process, writes a
// binlog into each, all four at once, as shards of one destination: server
// i gets the workload above with 800 rounds (1,080,000 selected and as
// many filtered row changes in 2,400 transactions, about 276 MiB of
// binlog) in shop_<2i> and shop_<2i+1>, so the four hold 4,320,000
// selected row changes in all: enough that a run's ends (start-up:
// connecting, loading schemas, and in strict order waiting for the slowest
// source to be ready; and in strict order the last transactions, which
// wait for the other sources' next heartbeat) are a small part of its
// time. The commit times are the real clock's: the
// four binlogs interleave as the generators ran, with 50 to 100
// transactions of every server in each second (MariaDB logs commit times
// in whole seconds, so most keys tie and are ordered by source index). The
// generation time is logged.
// Before the first run the benchmark waits out max_clock_skew, so that the
// sources' heartbeats, stamped with braid's clock minus the skew, are past
// every commit from the start.
//
// Each iteration reads the four binlogs in three ways, rotating which goes
// first, each from the start to the end positions SHOW MASTER STATUS gave
// after generation:
//
//   - merged: MergeBraid, a group.Destination over the four servers as the
//     sources of one spec (start `earliest`, the table filter above,
//     ordering strict, heartbeat 100ms, the rest at defaults), run into an
//     stream.Store bounded to MergeStoreBytes (64 MiB) with one consumer
//     that reads batches of up to 1,024 events and acks each, as a served
//     destination is read. It counts the merged stream's row
//     changes and stops at the first transaction boundary at which every
//     source has emitted a transaction ending at or after its end position
//     (or, since the merge swallows transactions that select nothing, when
//     all the expected row changes have arrived). On the way it checks the
//     stream's promises: seq dense and increasing, each transaction's events
//     together, transactions in merge-key order, no late transaction.
//   - unmerged: DecodeBraidEach, one binlog.Reader per server as in
//     BenchmarkDecode, all four at once, no merge.
//   - canal: DecodeCanalEach, one go-mysql canal per server as in
//     BenchmarkDecode, all four at once.
//
// Each way must deliver, for every source, exactly the selected row changes
// its workload wrote; a difference fails the benchmark. A way's time is the
// wall time from its first row change to its last source reaching its
// end: start-up (connecting and loading schemas, and in strict order
// waiting until every source can be compared, 60–140 ms) is left out, as
// it was a tenth of a run once braid read 3M rows/s; the iteration lines
// show it. The CPU the process used over a whole run, per row change, is
// reported for merged and canal.
//
// Reported (BenchmarkMerge/4-sources): merged-rows/s, unmerged-rows/s and
// canal-rows/s (all sources' selected row changes per second of wall time,
// the median of the iterations), merged/unmerged and merged/canal (the ratios of
// those rates), and merged-peak-heap-MiB, unmerged-peak-heap-MiB and
// canal-peak-heap-MiB (the process's peak heap in use while each way ran,
// as in BenchmarkDecode), merged-store-peak-MiB (the most the store held,
// never above its bound: the merge waited instead) and merged-live-heap-MiB
// (the merged run's peak live heap, what the last GC kept, garbage
// excluded). The targets, merged at least 0.9x unmerged and at
// least 1.0x canal, and the merged run's memory bound (its store's bound
// plus, per source, its queue's bound and its reader's read-ahead; see
// group.Config) against its peak live heap, are printed with the totals,
// met or MISSED, and never asserted. The totals are logged first (go test keeps a
// benchmark's first ten log lines), then the workload, then one line per
// iteration with its wall time and how long the merged stream took to
// deliver its first row.
//
// # What BenchmarkConsume measures
//
// How fast a served destination reaches one consumer, with the binlogs,
// the merge and the servers out of the way, against how fast the merge of
// the same binlogs runs, measured beside it. Once per run of the parent
// benchmark it starts two MariaDB servers, writes the workload above with
// 320 rounds into each as shards (shop_<2i> and shop_<2i+1>: 864,000
// selected row changes in all) and runs FillStore, a group.Destination
// over the two (as MergeBraid's) into a stream.Store bounded to 2 GiB and
// 10 million events, until every selected row change and the commit after
// the last are in it. FillStore subscribes a client id that never acks,
// so the store drops nothing: every client id subscribed afterwards starts
// at the first event, and -benchtime and -count are not capped. The store
// and the servers are released when the parent returns, so the other
// benchmarks' heap peaks do not include them.
//
// Each iteration of BenchmarkConsume/2-sources reads the whole store three
// times, once per consumer, and merges the two binlogs once more, rotating
// which goes first, each consumer with a client id no run used before:
//
//   - canal: ConsumeCanal, an api/canal Server on a loopback port serving
//     the store, read by one canal-go v1.1.2 SimpleCanalConnector
//     (connect, subscribe, then GetWithOutAck of 1,000 entries waiting up
//     to 100 ms and Ack, in a loop), which decodes each ROWDATA entry's
//     RowChange and counts its RowDatas.
//   - native: ConsumeNative, native.NewHandler on a loopback HTTP server,
//     read by the Go client's StreamViews (package client) in braid's
//     binary encoding, the client's default, reading every value of every
//     row and acking as it goes.
//   - native-json: the same, the stream asked for as NDJSON lines
//     (client.WithJSONLines), what a consumer in another language reads.
//   - merged: the reference, MergeBraid over the two servers' binlogs (a
//     strict merge through a 64 MiB store, as BenchmarkMerge runs it),
//     its rate counted from its first row as there.
//
// Each must deliver exactly the row changes in the store; a difference
// fails the benchmark. A consumer's time is the wall time from connecting
// to the last row change. Reported: canal-rows/s, native-rows/s,
// native-json-rows/s and merged-rows/s (medians over the iterations),
// canal-MB/s and native-MB/s (the bytes the server wrote on the consumer's
// connection, in 10^6 bytes per second), and each side's CPU per row
// (merged-us/row is the merge's). The table compares each consumer's rows/s
// with the merge's, and each side's CPU per row change (server, consumer)
// with the merge's, which says on any machine whether a side keeps up with
// the merge on as many cores: the target is a consumer that keeps
// up with the merge, so that it is not the bottleneck. The targets are
// printed, met or MISSED, never asserted. The merge runs in the same
// iterations because this machine's speed drifts by a quarter and more
// within minutes: against BenchmarkMerge's rate, measured minutes before,
// the same consumer run read 0.65x one time and 0.9x another. One line per
// iteration follows, with how long each consumer took to its first row
// (canal's first GET answers with 1,000 entries at once) and that
// iteration's native/merged ratio.
//
// # What BenchmarkCapture measures
//
// `braid capture` as a user runs it, against go-mysql canal on the same
// binlogs: BenchmarkMerge's fixture (four servers, 4,320,000 selected row
// changes; BenchmarkCapture builds it, and forgets it when it ends, since
// its servers stop then) and the braid binary of this module, built once
// per process (internal/testutil/braidproc). The spec is a YAML file as a
// user writes it, the destination MergeBraid reads: the four servers from
// `earliest`, the table filter, strict order, heartbeat 100ms, no route.
// Once per process a counting run (CountCapture, not timed) reads
// capture's output in this process, counts the row changes of every line
// and finds the exact number of messages N whose lines hold all the
// selected row changes (12,816: 4 per round and server, and 16 DDLs),
// checking each source's count against its workload, and that seqs are
// dense. The merged stream, and so its messages, is a function of the
// binlogs, so every later run's first N lines hold the same row changes.
// Each iteration of BenchmarkCapture/4-sources then runs, alternating
// which goes first:
//
//   - capture: `braid capture -f spec.yaml --max N | wc -l` (RunCapture),
//     capture's standard output a pipe read by a wc process. The stop is
//     exact: capture exits after its N-th line, which closes the pipe, and
//     wc then prints its count, which must be N. The time is the wall time
//     from starting the capture process to wc's exit (capture's exit, logged
//     too, comes a few milliseconds before it): process start, connecting,
//     schema loads and the strict merge's first wait included. Its CPU is
//     the capture process's own (rusage, user and system), its peak RSS the
//     kernel's maxrss.
//   - canal: DecodeCanalEach, four go-mysql canals at once, as in
//     BenchmarkMerge; the time is from starting them to the last source
//     reaching its end, start-up included like capture's; its CPU is this
//     process's over the run.
//
// Reported: capture-rows/s and canal-rows/s (selected row changes per
// second, the median of the iterations), capture/canal (their ratio;
// target at least 1.3, printed, never asserted), capture-us/row and
// canal-us/row (CPU per row change) and capture-peak-RSS-MiB. Both rows go
// to the results table under catch-up. The log adds the median of the
// iterations' own ratios (steadier than the ratio of the medians when the
// machine's speed drifts between iterations) and one line per iteration.
//
// # Running
//
//	make bench                                       # five iterations, rotating which goes first
//	go test -run '^$' -bench . -benchtime 3x -timeout 20m ./bench/
//	go test -run '^$' -bench 'Decode/braid-vs-canal' -benchtime 3x -count 5 ./bench/ > new.txt && benchstat new.txt
//	go test -run '^$' -bench Merge -benchtime 3x ./bench/
//	go test -run '^$' -bench Consume -benchtime 3x ./bench/
//	BRAID_BENCH_HELD_BYTES=100000000 go test -run '^$' -bench ShardDDLHeld -benchtime 1x ./bench/
//	BRAID_BENCH_SNAPSHOT_ROWS=400000 go test -run '^$' -bench Snapshot -benchtime 1x ./bench/
//	BRAID_BENCH_FIRST_ROW_BINS=old/braid,new/braid go test -run '^$' -bench CaptureFirstRow -benchtime 12x ./bench/
//
// The servers and the binlogs are set up once per process by each parent
// benchmark, so -count and -benchtime repeat only the reading. go test runs
// a sub-benchmark once with b.N = 1 before the -benchtime run, so -benchtime
// 5x reads everything six times. On a two-core machine BenchmarkMerge's
// setup takes about 30 s (servers, 23 s of generation, the skew wait) and
// an iteration about 7 s. BenchmarkConsume's setup takes about 13 s (8.5 s
// of generation) and an iteration 7–13 s, most of it the canal-go run.
//
// # Invariants
//
//   - The workload is deterministic: every run writes the same rows with
//     the same statements in the same transactions; only the binlog's
//     timestamps differ. Generate checks each statement's affected-row count,
//     so Workload's counts are what the binlog holds.
//   - A decoder run counts the row changes of transactions that end at or
//     before its End position, never more: it stops at the first transaction
//     boundary at or after End, and End is always a boundary. A merged run
//     stops at the first boundary where every source has reached its End
//     or all the expected row changes have arrived.
//   - A merged run checks the order of what it counts: a stream out of
//     merge-key order, with a gap in seq or with a late transaction fails
//     it.
//
// # Concurrency
//
// DecodeBraid, DecodeCanal, DecodeBraidEach, DecodeCanalEach, MergeBraid,
// FillStore, ConsumeCanal and ConsumeNative own every goroutine they start
// (the destination, the servers and their connections) and have stopped
// them when they return.
// Run one at a time: the peak heap they report is the whole process's.
package bench
