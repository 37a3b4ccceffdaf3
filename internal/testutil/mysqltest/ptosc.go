package mysqltest

import (
	"os"
	"os/exec"
	"testing"
)

// PtOSC is the path of Debian's pt-online-schema-change (percona-toolkit)
// for the online-schema-change tests. Without it the test is skipped, and
// fails under CI=true, where the tool is installed and a skip would hide
// the tests.
func PtOSC(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("pt-online-schema-change not installed: apt-get install percona-toolkit")
		}
		tb.Skip("pt-online-schema-change not installed (apt-get install percona-toolkit)")
	}
	return bin
}
