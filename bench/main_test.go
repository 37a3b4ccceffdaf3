package bench

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	RunConsumerChild() // returns unless this process is a consumer
	os.Exit(m.Run())
}
