package bench

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
)

// mysqlTxEnv sizes BenchmarkMySQLDecode: the INSERT transactions of the
// MySQL orders history (MySQLOrders), 50 orders each.
const mysqlTxEnv = "BRAID_BENCH_MYSQL_TX"

// mysqlFixture is the two MySQL test sources BenchmarkMySQLDecode's
// sub-benchmarks read, one serving the orders history plain and one
// compressed, built once per process.
var mysqlFixture struct {
	once sync.Once
	srvs map[string]*mysqlsource.Server
	ws   map[string]*Workload
}

// BenchmarkMySQLDecode reads one MySQL 8.4 binlog history, served by the
// MySQL test source (internal/testutil/mysqlsource, in this process), with
// braid's binlog.Reader and with go-mysql's canal, as BenchmarkDecode does
// against MariaDB: the orders shape (MySQLOrders: 50-order INSERT
// transactions beside a filtered audit table, then UPDATEs of every other
// order with before and after images; BIGINT, INT, DECIMAL(12,2),
// VARCHAR, DATETIME(6) and JSON, binary JSON in the binlog), once as
// plain transactions and once with binlog_transaction_compression=ON,
// every row transaction one zstd TRANSACTION_PAYLOAD.
//
// Each sub-benchmark (plain, compressed) reads the whole history with
// both decoders per iteration, alternating which goes first, and both
// must deliver exactly the selected row changes the history holds.
// Reported: braid-rows/s and canal-rows/s (the median of the
// iterations' rates, start-up included as in BenchmarkDecode) and their
// ratio, which the results table compares with the target (>=
// 1.0, printed met or MISSED, never asserted). The test source runs in
// this process and serves both decoders alike, so its CPU is in both
// runs' time; the peak heaps are logged, not reported, since they
// include the binlog the server holds.
func BenchmarkMySQLDecode(b *testing.B) {
	mysqlFixture.once.Do(func() {
		txs := 3000
		if s := os.Getenv(mysqlTxEnv); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a number of transactions, 1 or more", mysqlTxEnv, s)
			}
			txs = n
		}
		srvs, ws := map[string]*mysqlsource.Server{}, map[string]*Workload{}
		for _, way := range []string{"plain", "compressed"} {
			s := mysqlsource.Start(b, mysqlsource.Config{Version: mysqlsource.Version84})
			w, err := ServeMySQLOrders(s, txs, way == "compressed")
			if err != nil {
				b.Fatal(err)
			}
			srvs[way], ws[way] = s, w
		}
		mysqlFixture.srvs, mysqlFixture.ws = srvs, ws
	})
	if mysqlFixture.ws == nil {
		b.Skip("bench: the MySQL fixture could not be set up (see the first failure)")
	}
	for _, way := range []string{"plain", "compressed"} {
		s, w := mysqlFixture.srvs[way], mysqlFixture.ws[way]
		cfg := DecodeConfig{
			Addr: s.Addr(), User: "root", Flavor: "mysql",
			Start: w.Start, End: w.End, Tables: MySQLOrdersTables, Want: w.Selected,
		}
		b.Run(way, func(b *testing.B) { benchMySQLVersusCanal(b, way, cfg, w) })
	}
}

func benchMySQLVersusCanal(b *testing.B, way string, cfg DecodeConfig, w *Workload) {
	var br, cn total
	var lines []string
	for i := 0; i < b.N; i++ {
		order := []decoder{braidDecoder, canalDecoder}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		res := map[string]Result{}
		for _, d := range order {
			res[d.name] = d.run(b, cfg, w.Selected)
		}
		rb, rc := res["braid"], res["canal"]
		br.add(rb)
		cn.add(rc)
		lines = append(lines, fmt.Sprintf("iteration %d (%s first): braid %.0f rows/s (first row after %v, %.1f MiB peak heap); canal %.0f rows/s (first row after %v, %.1f MiB peak heap); braid/canal %.2f",
			i+1, order[0].name, rb.RowsPerSec(), rb.FirstRow.Round(time.Millisecond), mib(rb.PeakHeap),
			rc.RowsPerSec(), rc.FirstRow.Round(time.Millisecond), mib(rc.PeakHeap), rb.RowsPerSec()/rc.RowsPerSec()))
	}
	ratio := br.rowsPerSec() / cn.rowsPerSec()
	b.ReportMetric(0, "ns/op") // an iteration is two decoders: its time alone means nothing
	b.ReportMetric(br.rowsPerSec(), "braid-rows/s")
	b.ReportMetric(cn.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(ratio, "ratio")
	measure := "one MySQL 8.4 source (test source), orders shape, plain transactions, selected row changes/s"
	if way == "compressed" {
		measure = "one MySQL 8.4 source (test source), orders shape, binlog_transaction_compression=ON, selected row changes/s"
	}
	Record(Row{Section: "decode", Measure: measure, Value: br.rowsPerSec(), Unit: "rows/s",
		Peer: "go-mysql canal", PeerValue: cn.rowsPerSec(), Target: "ratio >= 1.0", Met: Met(ratio >= 1)})
	// go test keeps a benchmark's first ten log lines: totals first.
	b.Logf("%s, %d iteration(s): braid %.0f rows/s vs canal %.0f rows/s = %.2fx (target >= 1.0: %s)",
		way, b.N, br.rowsPerSec(), cn.rowsPerSec(), ratio, met(ratio, 1))
	b.Logf("workload: %s", w)
	for _, l := range lines {
		b.Log(l)
	}
}
