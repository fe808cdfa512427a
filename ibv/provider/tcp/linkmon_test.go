package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/internal/testutil"
)

// linkMsg builds one rtnetlink message: header, ifinfomsg with index and flags.
func linkMsg(typ uint16, index int32, flags uint32, extra int) []byte {
	l := unix.SizeofNlMsghdr + unix.SizeofIfInfomsg + extra
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint32(b[0:], uint32(l))
	binary.NativeEndian.PutUint16(b[4:], typ)
	ifi := b[unix.SizeofNlMsghdr:]
	binary.NativeEndian.PutUint32(ifi[4:], uint32(index))
	binary.NativeEndian.PutUint32(ifi[8:], flags)
	return b
}

func TestParseLinkMsgs(t *testing.T) {
	up := uint32(unix.IFF_UP | unix.IFF_LOWER_UP)
	var b []byte
	b = append(b, linkMsg(unix.RTM_NEWLINK, 3, up, 5)...)
	b = append(b, linkMsg(unix.RTM_NEWADDR, 4, up, 0)...) // not a link message: skipped
	b = append(b, linkMsg(unix.RTM_NEWLINK, 7, unix.IFF_UP, 0)...)
	b = append(b, linkMsg(unix.RTM_DELLINK, 9, up, 0)...)
	type got struct {
		index int
		up    bool
	}
	var seen []got
	parseLinkMsgs(b, func(i int, f uint32) { seen = append(seen, got{i, linkUp(f)}) })
	require.Equal(t, []got{{3, true}, {7, false}, {9, false}}, seen)

	// malformed input: a length beyond the buffer, a zero length, a truncated ifinfomsg
	for _, bad := range [][]byte{
		{0xff, 0xff, 0, 0, byte(unix.RTM_NEWLINK), 0},
		make([]byte, 40),
		linkMsg(unix.RTM_NEWLINK, 1, up, 0)[:unix.SizeofNlMsghdr+4],
	} {
		n := 0
		require.NotPanics(t, func() { parseLinkMsgs(bad, func(int, uint32) { n++ }) })
		require.Zero(t, n)
	}
}

func FuzzParseLinkMsgs(f *testing.F) {
	f.Add(linkMsg(unix.RTM_NEWLINK, 2, unix.IFF_UP, 3))
	f.Fuzz(func(t *testing.T, b []byte) { parseLinkMsgs(b, func(int, uint32) {}) })
}

// TestProbeNeedsHandshake: a path load's probe succeeds to a live port and fails where no one
// answers the handshake, even though a stream to that address was open before.
func TestProbeNeedsHandshake(t *testing.T) {
	a, b := open(t, 1, Config{}), open(t, 1, Config{})
	pb, err := b.QueryPort(1)
	require.NoError(t, err)
	tr := (*transport)(provider.DeviceDriver(a).(*driver))
	path := ibv.AHAttr{Addr: pb.Addr, DLID: pb.LID, PortNum: 1}
	require.NoError(t, tr.Probe(context.Background(), path))

	// a port that accepted a stream and then stopped answering handshakes: its listener gone
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	err = tr.Probe(context.Background(), ibv.AHAttr{Addr: addr, PortNum: 1})
	require.Error(t, err)
}

const linkChildEnv = "GOARMCI_TEST_LINKMON_CHILD"

// TestLinkMonitorNetns: a device bound to a veth rail in a network namespace follows the
// carrier. The peer host pulls the cable (ip link set down on its end); the device must post
// PORT_ERR and report PortDown, then PORT_ACTIVE and PortActive once the cable is back.
// Skips without root.
func TestLinkMonitorNetns(t *testing.T) {
	if addr := os.Getenv(linkChildEnv); addr != "" {
		linkChild(t, addr)
		return
	}
	if testing.Short() {
		t.Skip("starts a process in a network namespace")
	}
	tb := testutil.NewTestbed(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := tb.Command(ctx, 1, os.Args[0], "-test.run=^TestLinkMonitorNetns$", "-test.count=1")
	cmd.Env = append(os.Environ(), linkChildEnv+"="+tb.Hosts[1].Addrs[0])
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() { // on success the child is already on its way out; on failure it is killed
		_ = stdin.Close()
		cancel()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		t.Helper()
		for lines.Scan() {
			if l, ok := strings.CutPrefix(lines.Text(), "linkmon: "); ok {
				return l
			}
		}
		t.Fatalf("child ended early: %v", lines.Err())
		return ""
	}
	expect := func(want string) {
		t.Helper()
		require.Equal(t, want, next())
	}
	// the kernel may still be bringing the fresh veth's carrier up (linkwatch)
	if l := next(); l != "ready "+ibv.PortActive.String() {
		require.Equal(t, "ready "+ibv.PortDown.String(), l)
		expect("event " + ibv.EventPortActive.String() + " port 1 state " + ibv.PortActive.String())
	}
	tb.SetLink(0, false)
	expect("event " + ibv.EventPortErr.String() + " port 1 state " + ibv.PortDown.String())
	tb.SetLink(0, true)
	expect("event " + ibv.EventPortActive.String() + " port 1 state " + ibv.PortActive.String())
	require.NoError(t, stdin.Close()) // the child closes its device and exits
}

// linkChild runs in the namespace: it opens a device on addr and prints its port events.
func linkChild(t *testing.T, addr string) {
	dev, err := Open(Config{Ports: []PortConfig{{Listen: net.JoinHostPort(addr, "0")}}})
	require.NoError(t, err)
	defer dev.Close()
	pa, err := dev.QueryPort(1)
	require.NoError(t, err)
	fmt.Printf("linkmon: ready %s\n", pa.State)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the parent closes stdin when it is done
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		cancel()
	}()
	for {
		ev, err := dev.GetAsyncEvent(ctx)
		if err != nil {
			return
		}
		pa, err := dev.QueryPort(ev.Port)
		require.NoError(t, err)
		fmt.Printf("linkmon: event %s port %d state %s\n", ev.Type, ev.Port, pa.State)
	}
}
