package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Testbed is a set of "hosts" on this machine: network namespaces joined per rail, either by one
// veth pair (two hosts, NewTestbed) or through a switch (N hosts, NewSwitchedTestbed: one Linux
// bridge per rail in a namespace of its own, each host's rail a veth whose other end is a bridge
// port). Host h's address on rail r is 169.254.(10+r).(h+1)/24 — link-local only.
type Testbed struct {
	t     testing.TB
	Hosts []TestHost
	sw    string // the switch namespace ("" for two hosts joined point to point)
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
	if rails < 1 || rails > 8 {
		t.Fatalf("testbed: %d rails", rails)
	}
	return ownTestbed(t, func() (*Testbed, error) { return OpenTestbed(rails) })
}

// ownTestbed opens a testbed for t (root and iproute2 checked, skipping without them or where
// namespaces are refused) and removes it when the test ends.
func ownTestbed(t testing.TB, open func() (*Testbed, error)) *Testbed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns testbed needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns testbed needs iproute2 (ip)")
	}
	tb, err := open()
	if err != nil {
		if errors.Is(err, ErrNoNamespaces) {
			t.Skipf("%v", err)
		}
		t.Fatalf("%v", err)
	}
	tb.t = t
	t.Cleanup(tb.cleanup)
	return tb
}

// Errors of OpenTestbed; test them with errors.Is.
var (
	// ErrNotRoot: the testbed needs root (network namespaces, veth, tc).
	ErrNotRoot = errors.New("testbed: needs root")
	// ErrNoNamespaces: iproute2 is missing or namespaces cannot be created here.
	ErrNoNamespaces = errors.New("testbed: network namespaces unavailable")
	// ErrTestbed: a testbed command (ip, tc) failed, or a bad host or rail index.
	ErrTestbed = errors.New("testbed: command failed")
)

// OpenTestbed builds the testbed of NewTestbed outside a test (the scenario benchmarks of
// `goarmci bench`): two hosts joined by rails veth pairs. The caller removes it with Close.
// Errors: ErrNotRoot, ErrNoNamespaces (iproute2 missing, namespaces refused), ErrTestbed.
func OpenTestbed(rails int) (*Testbed, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: iproute2 (ip) not found", ErrNoNamespaces)
	}
	if rails < 1 || rails > 8 {
		return nil, fmt.Errorf("%w: %d rails (want 1..8)", ErrTestbed, rails)
	}
	tag := fmt.Sprintf("ga%d_%d", os.Getpid()%100000, testbedSeq.Add(1))
	tb := &Testbed{}
	for h := 0; h < 2; h++ {
		ns := fmt.Sprintf("%sh%d", tag, h)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			tb.cleanup()
			return nil, fmt.Errorf("%w: cannot create namespaces: %v: %s", ErrNoNamespaces, err, strings.TrimSpace(string(out)))
		}
		tb.Hosts = append(tb.Hosts, TestHost{NS: ns})
	}
	fail := func(err error) (*Testbed, error) {
		tb.cleanup()
		return nil, err
	}
	for h := 0; h < 2; h++ {
		if err := run("ip", "-n", tb.Hosts[h].NS, "link", "set", "lo", "up"); err != nil {
			return fail(err)
		}
	}
	for r := 0; r < rails; r++ {
		a, b := fmt.Sprintf("%sr%da", tag, r), fmt.Sprintf("%sr%db", tag, r)
		if err := run("ip", "link", "add", a, "netns", tb.Hosts[0].NS, "type", "veth", "peer", "name", b, "netns", tb.Hosts[1].NS); err != nil {
			return fail(err)
		}
		for h, ifc := range []string{a, b} {
			addr := fmt.Sprintf("169.254.%d.%d", 10+r, h+1)
			if err := run("ip", "-n", tb.Hosts[h].NS, "addr", "add", addr+"/24", "dev", ifc); err != nil {
				return fail(err)
			}
			if err := run("ip", "-n", tb.Hosts[h].NS, "link", "set", ifc, "up"); err != nil {
				return fail(err)
			}
			tb.Hosts[h].Addrs = append(tb.Hosts[h].Addrs, addr)
			tb.Hosts[h].Ifaces = append(tb.Hosts[h].Ifaces, ifc)
		}
	}
	return tb, nil
}

// Close removes the namespaces (and with them the veth pairs and qdiscs).
func (tb *Testbed) Close() error {
	tb.cleanup()
	return nil
}

// Rails is the number of rails.
func (tb *Testbed) Rails() int {
	if len(tb.Hosts) == 0 {
		return 0
	}
	return len(tb.Hosts[0].Ifaces)
}

// run runs a testbed command; errors wrap ErrTestbed with the command's output.
func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s: %v: %s", ErrTestbed, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (tb *Testbed) check(h, r int) error {
	if h < 0 || h >= len(tb.Hosts) || r < 0 || r >= len(tb.Hosts[h].Ifaces) {
		return fmt.Errorf("%w: host %d rail %d (have %d hosts, %d rails)", ErrTestbed, h, r, len(tb.Hosts), tb.Rails())
	}
	return nil
}

// fatal reports err through the test (NewTestbed) or panics for a testbed opened without one
// (callers of OpenTestbed use the error-returning methods).
func (tb *Testbed) fatal(err error) {
	if tb.t == nil {
		panic(err)
	}
	tb.t.Helper()
	tb.t.Fatalf("%v", err)
}

func (tb *Testbed) cleanup() {
	for _, h := range tb.Hosts {
		_ = exec.Command("ip", "netns", "del", h.NS).Run()
	}
	if tb.sw != "" {
		_ = exec.Command("ip", "netns", "del", tb.sw).Run()
		tb.sw = ""
	}
	tb.Hosts = nil
}

// MaxSwitchedHosts bounds NewSwitchedTestbed's hosts (addresses 169.254.(10+r).1–250).
const MaxSwitchedHosts = 250

// NewSwitchedTestbed builds a testbed of hosts namespaces whose rails each meet in a switch (a
// Linux bridge per rail, in a namespace of its own) and removes it when the test ends. It skips
// the test (cleanly, with the reason) without root or iproute2, or where namespaces or bridges
// cannot be created.
func NewSwitchedTestbed(t testing.TB, hosts, rails int) *Testbed {
	t.Helper()
	return ownTestbed(t, func() (*Testbed, error) { return OpenSwitchedTestbed(hosts, rails) })
}

// OpenSwitchedTestbed builds the testbed of NewSwitchedTestbed outside a test; the caller removes
// it with Close. Link and Rate act on host 0's port of a rail (as on a two-host testbed).
// Errors: ErrNotRoot, ErrNoNamespaces (iproute2 missing, namespaces or bridges refused),
// ErrTestbed (also for hosts outside 2..MaxSwitchedHosts or rails outside 1..8).
func OpenSwitchedTestbed(hosts, rails int) (*Testbed, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: iproute2 (ip) not found", ErrNoNamespaces)
	}
	if rails < 1 || rails > 8 || hosts < 2 || hosts > MaxSwitchedHosts {
		return nil, fmt.Errorf("%w: %d hosts, %d rails (want 2..%d, 1..8)", ErrTestbed, hosts, rails, MaxSwitchedHosts)
	}
	tag := fmt.Sprintf("gs%d_%d", os.Getpid()%100000, testbedSeq.Add(1))
	tb := &Testbed{sw: tag + "sw"}
	fail := func(err error) (*Testbed, error) {
		tb.cleanup()
		return nil, err
	}
	if out, err := exec.Command("ip", "netns", "add", tb.sw).CombinedOutput(); err != nil {
		tb.sw = ""
		return nil, fmt.Errorf("%w: cannot create namespaces: %v: %s", ErrNoNamespaces, err, strings.TrimSpace(string(out)))
	}
	for r := 0; r < rails; r++ {
		br := fmt.Sprintf("br%d", r)
		// without multicast snooping the bridge floods a multicast frame to every port, as a
		// switch that replicates to the group's members once they attached: with snooping, a
		// host whose IGMP report the bridge has not seen yet misses the group's first frames
		if out, err := exec.Command("ip", "-n", tb.sw, "link", "add", br, "type", "bridge", "mcast_snooping", "0").CombinedOutput(); err != nil {
			return fail(fmt.Errorf("%w: cannot create a bridge: %v: %s", ErrNoNamespaces, err, strings.TrimSpace(string(out))))
		}
		if err := run("ip", "-n", tb.sw, "link", "set", br, "up"); err != nil {
			return fail(err)
		}
	}
	for h := 0; h < hosts; h++ {
		ns := fmt.Sprintf("%sh%d", tag, h)
		if err := run("ip", "netns", "add", ns); err != nil {
			return fail(err)
		}
		tb.Hosts = append(tb.Hosts, TestHost{NS: ns})
		if err := run("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return fail(err)
		}
		for r := 0; r < rails; r++ {
			ifc, port := fmt.Sprintf("%sh%dr%d", tag, h, r), fmt.Sprintf("p%dr%d", h, r)
			addr := fmt.Sprintf("169.254.%d.%d", 10+r, h+1)
			for _, args := range [][]string{
				{"ip", "link", "add", ifc, "netns", ns, "type", "veth", "peer", "name", port, "netns", tb.sw},
				{"ip", "-n", tb.sw, "link", "set", port, "master", fmt.Sprintf("br%d", r)},
				{"ip", "-n", tb.sw, "link", "set", port, "up"},
				{"ip", "-n", ns, "addr", "add", addr + "/24", "dev", ifc},
				{"ip", "-n", ns, "link", "set", ifc, "up"},
			} {
				if err := run(args...); err != nil {
					return fail(err)
				}
			}
			tb.Hosts[h].Addrs = append(tb.Hosts[h].Addrs, addr)
			tb.Hosts[h].Ifaces = append(tb.Hosts[h].Ifaces, ifc)
		}
	}
	return tb, nil
}

// Command runs name with args on host h (ip netns exec).
func (tb *Testbed) Command(ctx context.Context, h int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", tb.Hosts[h].NS, name}, args...)...)
}

// Bytes returns the bytes received and sent so far by host h on rail r.
func (tb *Testbed) Bytes(h, r int) (rx, tx uint64) {
	rx, tx, err := tb.Counters(h, r)
	if err != nil {
		tb.fatal(err)
	}
	return rx, tx
}

// Counters returns the bytes received and sent so far by host h on rail r (the interface's
// statistics). Errors wrap ErrTestbed.
func (tb *Testbed) Counters(h, r int) (rx, tx uint64, err error) {
	if err := tb.check(h, r); err != nil {
		return 0, 0, err
	}
	read := func(what string) (uint64, error) {
		out, err := exec.Command("ip", "netns", "exec", tb.Hosts[h].NS, "cat",
			"/sys/class/net/"+tb.Hosts[h].Ifaces[r]+"/statistics/"+what).Output()
		if err != nil {
			return 0, fmt.Errorf("%w: %s counter: %v", ErrTestbed, what, err)
		}
		return strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	}
	if rx, err = read("rx_bytes"); err != nil {
		return 0, 0, err
	}
	tx, err = read("tx_bytes")
	return rx, tx, err
}

// SetRate limits host h's egress on rail r to rate (tc tbf, e.g. "1gbit"); "" removes the limit.
func (tb *Testbed) SetRate(h, r int, rate string) {
	if err := tb.Rate(h, r, rate); err != nil {
		tb.fatal(err)
	}
}

// Rate is SetRate returning its error (ErrTestbed): it replaces host h's egress qdisc on rail r
// by a tbf of rate ("400mbit"; burst 256 KiB, latency 50 ms), or removes it for "".
func (tb *Testbed) Rate(h, r int, rate string) error {
	if err := tb.check(h, r); err != nil {
		return err
	}
	ns, ifc := tb.Hosts[h].NS, tb.Hosts[h].Ifaces[r]
	_ = exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", ifc, "root").Run()
	if rate == "" {
		return nil
	}
	return run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", ifc, "root", "tbf", "rate", rate, "burst", "256kb", "latency", "50ms")
}

// ChangeRate changes the rate of the tbf already on host h's egress of rail r while traffic
// flows (tc qdisc change: no qdisc is removed, queued packets stay), to create a hot spot.
// Errors wrap ErrTestbed (also when no tbf is there).
func (tb *Testbed) ChangeRate(h, r int, rate string) error {
	if err := tb.check(h, r); err != nil {
		return err
	}
	return run("ip", "netns", "exec", tb.Hosts[h].NS, "tc", "qdisc", "change", "dev", tb.Hosts[h].Ifaces[r], "root",
		"tbf", "rate", rate, "burst", "256kb", "latency", "50ms")
}

// SetLink pulls (up false) or plugs (up true) the cable of rail r.
func (tb *Testbed) SetLink(r int, up bool) {
	if err := tb.Link(r, up); err != nil {
		tb.fatal(err)
	}
}

// Link is SetLink returning its error (ErrTestbed): host 0's end of rail r goes down or up,
// which takes the veth pair's carrier down for both hosts.
func (tb *Testbed) Link(r int, up bool) error {
	if err := tb.check(0, r); err != nil {
		return err
	}
	state := "down"
	if up {
		state = "up"
	}
	return run("ip", "-n", tb.Hosts[0].NS, "link", "set", tb.Hosts[0].Ifaces[r], state)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
