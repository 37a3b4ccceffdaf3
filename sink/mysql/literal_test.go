package mysql_test

import (
	"testing"

	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// TestLiteralsOnServer: every literal braid writes into MySQL text
// (schema.QuoteString) reads back on the machine's MariaDB as the bytes
// it was made of, alone and as ENUM members of a table the sink's
// create_tables path would declare.
func TestLiteralsOnServer(t *testing.T) {
	db, _ := targetDB(t)
	for _, s := range append(sinktest.Nasty, sinktest.Mixed(t, sinktest.Nasty, 300)...) {
		var got []byte
		if err := db.QueryRow("SELECT " + schema.QuoteString(s)).Scan(&got); err != nil {
			t.Errorf("SELECT %s: %v", schema.QuoteString(s), err)
			continue
		}
		if string(got) != s {
			t.Errorf("SELECT %s returned %q, want %q", schema.QuoteString(s), got, s)
		}
	}
}
