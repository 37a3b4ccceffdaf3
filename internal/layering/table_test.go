package layering

// The allowed imports, written from DESIGN.md, section "The data path, and
// the house that should show it" (its table of packages and the line
// "Dependencies point one way"). Change the two together.
//
// Keys and entries are paths inside the module. A path ending in "/..."
// names that package and every package below it; "..." alone names every
// package of the module. A package is governed by its exact key if it has
// one, else by the longest "/..." key that covers it. Only braid packages
// are listed: anything outside the module may be imported freely.

// apiMay is what the two protocols, api/canal and api/native, may import.
var apiMay = []string{
	"stream", "group", "engine/flat", "engine/change", "spec", "engine/schema",
	"api/wire", "internal/jsontext", "internal/throttle",
}

// sinkMay is what a sink may import: the stream it applies, and the layers
// below it.
var sinkMay = []string{
	"stream", "group", "engine/flat", "engine/change", "spec", "engine/schema", "api/wire",
	"internal/sqlutf8", "internal/mysqlauth",
}

// clusterMay is what cluster may import: everything a node serves and runs.
var clusterMay = []string{
	"api/canal", "api/native", "api/wire", "api/metrics", "cluster/statuspage",
	"stream", "group", "raftstore", "engine/binlog", "spec", "engine/change", "engine/schema", "engine/flat",
	"sink/...", "destination",
	"internal/jsontext", "internal/ports", "internal/netlimit", "internal/secret",
	"auth",
}

// testHarnesses are the test harnesses: no server package imports them, and
// the shipped binary does not link them.
const testHarnesses = "internal/testutil/..."

// table is the allowed braid imports of each package's non-test files.
var table = map[string]rule{
	// The bottom: the change model, the destination spec, schema history.
	"engine/change": {may: []string{"internal/jsontext"}},
	"spec":          {may: []string{"engine/change"}},
	"engine/schema": {may: []string{"engine/change"}},

	// One source, then many sources as one destination, then the store.
	"engine/binlog": {may: []string{"engine/change", "engine/schema", "spec", "internal/sqlutf8", "internal/mysqlauth"}},
	"group":         {may: []string{"engine/binlog", "engine/change", "engine/schema", "spec"}},
	"stream":        {may: []string{"group", "engine/change", "spec"}},

	// Output encodings use only change's exported API.
	"engine/flat": {may: []string{"engine/change", "internal/jsontext"}},

	// The replicated state machine.
	"raftstore": {may: []string{"group", "engine/change", "engine/schema", "spec"}},

	// The protocols; wire holds the HTTP API's JSON shapes and needs no one.
	"api/wire":   {},
	"auth":       {may: []string{"internal/throttle"}},
	"api/canal":  {may: apiMay},
	"api/native": {may: apiMay},
	// Prometheus's exposition reads the snapshots of the layers below.
	"api/metrics": {may: []string{"stream", "group", "engine/change", "spec"}}, // spec: the sink types

	// Sinks: the runner (sink), and the targets below it (sink/mysql,
	// sink/postgres, ...), which implement its Target.
	"sink":     {may: sinkMay},
	"sink/...": {may: append([]string{"sink"}, sinkMay...)},
	// sink/sinkrun starts a spec's sinks: it alone knows every target type.
	"sink/sinkrun": {may: append([]string{"sink", "sink/mysql", "sink/postgres", "sink/redis", "sink/rabbitmq", "sink/kafka", "sink/verify"}, sinkMay...)},
	// sink/verify compares a target with the sources, which it reads as
	// sink/mysql reads a MySQL table.
	"sink/verify": {may: append([]string{"sink", "sink/mysql"}, sinkMay...)},
	// sink/conformance is the suite every target's tests run: it builds
	// sinks as braid does (sink/sinkrun) over sources a test harness starts.
	"sink/conformance": {may: append([]string{"sink", "sink/sinkrun", testHarnesses}, sinkMay...)},

	// One destination run: its pipeline, its sinks, its clients' cursors
	// kept; braid capture and a cluster node's owner both call it, so it
	// sits above the sinks and below the node.
	"destination": {may: []string{"stream", "group", "spec", "engine/change", "sink", "sink/sinkrun"}},

	// The node, and its in-process harness for tests.
	"cluster":             {may: clusterMay},
	"cluster/statuspage":  {may: []string{"api/wire"}}, // the page's files, the lag history it charts
	"cluster/clustertest": {may: append([]string{"cluster", "internal/pki"}, clusterMay...)},

	// The one Go client speaks only the wire types.
	"client": {may: []string{"api/wire", "internal/jsontext"}},

	// Runtime helpers.
	"internal/jsontext": {},
	"internal/ports":    {},
	"internal/netlimit": {},
	"internal/secret":   {},
	"internal/pki":      {},
	// Log lines a client can repeat at will (failed logins), throttled.
	"internal/throttle": {},
	"internal/mariadb":  {may: []string{"internal/ports", "internal/sqlutf8"}},
	// Every SQL session braid opens is UTF-8: sources, targets, harnesses.
	"internal/sqlutf8": {},
	// No MySQL connection gives a server the password in clear.
	"internal/mysqlauth":    {},
	"internal/localcluster": {may: []string{"api/wire", "client", "internal/ports", "internal/pki", "auth"}},

	// Scripted sources and a fake clock for group's tests: a
	// destination runs on them with no server and no sleep.
	"group/grouptest": {may: []string{"group", "engine/binlog", "engine/change", "spec"}},

	// The one suite every group.Keeper passes (file, memory, Raft): it
	// builds the cursors, decisions and placements it keeps.
	"internal/keeptest": {may: []string{"group", "engine/change", "engine/schema"}},

	// Test harnesses exec the binary and speak wire types; never server
	// packages.
	testHarnesses: {may: []string{
		"api/wire", "client",
		"internal/localcluster", "internal/mariadb", "internal/ports", "internal/jsontext",
		"internal/sqlutf8", "internal/pki", testHarnesses,
	}},

	// The binary may call anything but a test harness.
	"cmd/braid": {may: []string{"..."}, mayNot: []string{testHarnesses}},
	// braid demo is a program of its own beside the command line (it
	// starts shard servers and braid server processes, runs a workload and
	// checks its stream): it drives a cluster from outside, as a user
	// would, through the client and the wire types, never server packages.
	"cmd/braid/internal/demo": {may: []string{"api/wire", "client", "internal/localcluster", "internal/mariadb", "internal/sqlutf8"}},

	// The process-level kill and failover tests: only _test.go files, which
	// the table does not check (they start braid processes and read the
	// stream from outside); its doc.go imports nothing.
	"internal/e2e": {},

	// make chaos: a whole deployment under a seeded fault schedule,
	// driven from outside as the demo is (client, wire types, processes);
	// it reads the targets itself.
	"chaos/...": {may: []string{"chaos", "api/wire", "client", "internal/localcluster", "internal/mariadb"}},

	// Benchmarks measure everything.
	"bench": {may: []string{"..."}},

	// This package.
	"internal/layering": {},
}
