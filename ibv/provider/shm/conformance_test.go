//go:build linux

package shm_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider/shm"
)

// TestConformance runs the provider-independent verbs suite on shm devices of one job in this
// process. shm has no UD and no two-sided operations (see the package doc), so those cases skip.
func TestConformance(t *testing.T) {
	job := fmt.Sprintf("conf%d-%x", os.Getpid(), rand.Uint32())
	t.Cleanup(func() { _ = shm.Cleanup(job) })
	var n atomic.Int32
	ibvtest.Run(t, ibvtest.Funcs{
		OpenFunc: func(t testing.TB) *ibv.Context {
			t.Helper()
			c, err := shm.Open(shm.Config{Job: job, Name: fmt.Sprintf("d%d", n.Add(1))})
			if err != nil {
				t.Fatalf("shm.Open: %v", err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		AllocFunc:    shm.AllocBuffer,
		FreeFunc:     shm.FreeBuffer,
		Capabilities: ibvtest.Caps{RC: true, Atomics: true, Accumulate: true, APM: true},
	})
}
