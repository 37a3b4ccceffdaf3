package bench

import (
	"fmt"
	"os"
	"testing"
)

// resultsEnv names the file `make bench` writes the results table to as
// JSON; unset, only the table is printed.
const resultsEnv = "BRAID_BENCH_RESULTS"

func TestMain(m *testing.M) {
	RunConsumerChild() // returns unless this process is a consumer
	code := m.Run()
	if err := printReport(os.Stdout, os.Getenv(resultsEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "bench: results:", err)
	}
	os.Exit(code)
}
