package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/spec"
)

// TestAnswersHideSourcePasswords: a source password in a spec never comes
// back in an API answer (the create response, the spec, the cluster
// status), and the destination still runs with it.
func TestAnswersHideSourcePasswords(t *testing.T) {
	const password = "s3cret-Xq7"
	src := startSource(t)
	src.Exec(t, fmt.Sprintf("CREATE USER 'braid'@'%%' IDENTIFIED BY '%s'", password),
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT ON *.* TO 'braid'@'%'")
	c := clustertest.Start(t, 3)
	cl, err := client.New(strings.Join(c.URLs(), ","), client.WithToken(clustertest.AdminUser, clustertest.AdminPassword))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	created, err := cl.CreateDestination(ctx, []byte(fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', user: braid, password: '%s', start: earliest}
tables: ['app\.orders']
heartbeat: 100ms
`, src.Addr(), password)))
	if err != nil {
		t.Fatal(err)
	}
	c.Owner("shop")
	cs := consume(t, c.URLs(), "shop", "reader")
	insert(t, src, 1, 2, 3)
	cs.waitRows(t, 1, 2, 3) // it runs with the password

	shown, err := cl.Destination(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	status, err := cl.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, answer := range map[string]any{"create response": created, "destination spec": shown, "cluster status": status} {
		b, _ := json.Marshal(answer)
		if strings.Contains(string(b), password) {
			t.Errorf("the %s holds the source password: %s", what, b)
		}
		if !strings.Contains(string(b), spec.Hidden) {
			t.Errorf("the %s shows no hidden password: %s", what, b)
		}
	}
}
