package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// Testbed is a set of "hosts" on this machine: network namespaces joined by one veth pair per
// rail (DESIGN.md §6). Host h's address on rail r is 169.254.(10+r).(h+1)/24 — link-local only.
// Two hosts are supported (a point-to-point link per rail).
type Testbed struct {
	t     testing.TB
	Hosts []TestHost
}

// TestHost is one namespace.
type TestHost struct {
	NS     string
	Addrs  []string // per rail, without prefix length
	Ifaces []string // per rail
}

var testbedSeq atomic.Int32

// NewTestbed builds a testbed of two hosts joined by rails veth pairs and removes it when the
// test ends. It skips the test (cleanly, with the reason) without root or iproute2, or where
// namespaces cannot be created.
func NewTestbed(t testing.TB, rails int) *Testbed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns testbed needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns testbed needs iproute2 (ip)")
	}
	if rails < 1 || rails > 8 {
		t.Fatalf("testbed: %d rails", rails)
	}
	tag := fmt.Sprintf("ga%d_%d", os.Getpid()%100000, testbedSeq.Add(1))
	tb := &Testbed{t: t}
	for h := 0; h < 2; h++ {
		ns := fmt.Sprintf("%sh%d", tag, h)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			tb.cleanup()
			t.Skipf("netns testbed: cannot create namespaces: %v: %s", err, strings.TrimSpace(string(out)))
		}
		tb.Hosts = append(tb.Hosts, TestHost{NS: ns})
	}
	t.Cleanup(tb.cleanup)
	tb.must("ip", "-n", tb.Hosts[0].NS, "link", "set", "lo", "up")
	tb.must("ip", "-n", tb.Hosts[1].NS, "link", "set", "lo", "up")
	for r := 0; r < rails; r++ {
		a, b := fmt.Sprintf("%sr%da", tag, r), fmt.Sprintf("%sr%db", tag, r)
		tb.must("ip", "link", "add", a, "netns", tb.Hosts[0].NS, "type", "veth", "peer", "name", b, "netns", tb.Hosts[1].NS)
		for h, ifc := range []string{a, b} {
			addr := fmt.Sprintf("169.254.%d.%d", 10+r, h+1)
			tb.must("ip", "-n", tb.Hosts[h].NS, "addr", "add", addr+"/24", "dev", ifc)
			tb.must("ip", "-n", tb.Hosts[h].NS, "link", "set", ifc, "up")
			tb.Hosts[h].Addrs = append(tb.Hosts[h].Addrs, addr)
			tb.Hosts[h].Ifaces = append(tb.Hosts[h].Ifaces, ifc)
		}
	}
	return tb
}

func (tb *Testbed) must(args ...string) {
	tb.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		tb.t.Fatalf("testbed: %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (tb *Testbed) cleanup() {
	for _, h := range tb.Hosts {
		_ = exec.Command("ip", "netns", "del", h.NS).Run()
	}
	tb.Hosts = nil
}

// Command runs name with args on host h (ip netns exec).
func (tb *Testbed) Command(ctx context.Context, h int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", tb.Hosts[h].NS, name}, args...)...)
}

// Bytes returns the bytes received and sent so far by host h on rail r.
func (tb *Testbed) Bytes(h, r int) (rx, tx uint64) {
	read := func(what string) uint64 {
		out, err := exec.Command("ip", "netns", "exec", tb.Hosts[h].NS, "cat",
			"/sys/class/net/"+tb.Hosts[h].Ifaces[r]+"/statistics/"+what).Output()
		if err != nil {
			tb.t.Fatalf("testbed: %s counter: %v", what, err)
		}
		v, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		return v
	}
	return read("rx_bytes"), read("tx_bytes")
}

// SetRate limits host h's egress on rail r to rate (tc tbf, e.g. "1gbit"); "" removes the limit.
func (tb *Testbed) SetRate(h, r int, rate string) {
	tb.t.Helper()
	ns, ifc := tb.Hosts[h].NS, tb.Hosts[h].Ifaces[r]
	_ = exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", ifc, "root").Run()
	if rate != "" {
		tb.must("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", ifc, "root", "tbf", "rate", rate, "burst", "256kb", "latency", "50ms")
	}
}

// SetLink pulls (up false) or plugs (up true) the cable of rail r.
func (tb *Testbed) SetLink(r int, up bool) {
	tb.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	tb.must("ip", "-n", tb.Hosts[0].NS, "link", "set", tb.Hosts[0].Ifaces[r], state)
}
