package bootstrap

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakePMI is a PMI-1 server as MPICH's Hydra speaks it, for n processes.
type fakePMI struct {
	t  *testing.T
	n  int
	mu sync.Mutex
	kv map[string]string
	// barrier
	waiting []net.Conn
	cmds    []string // every command line received
	wg      sync.WaitGroup
}

func newFakePMI(t *testing.T, n int) *fakePMI {
	f := &fakePMI{t: t, n: n, kv: map[string]string{}}
	t.Cleanup(f.wg.Wait)
	return f
}

func (f *fakePMI) serve(c net.Conn, portRank int) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer c.Close()
		r := bufio.NewReader(c)
		reply := func(s string) { _, _ = c.Write([]byte(s + "\n")) }
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			kv, err := parsePMILine(strings.TrimSpace(line))
			if err != nil {
				reply("cmd=error rc=1")
				return
			}
			f.mu.Lock()
			f.cmds = append(f.cmds, kv["cmd"])
			f.mu.Unlock()
			switch kv["cmd"] {
			case "initack":
				reply("cmd=initack")
				reply(fmt.Sprintf("cmd=set size=%d", f.n))
				reply(fmt.Sprintf("cmd=set rank=%d", portRank))
				reply("cmd=set debug=0")
			case "init":
				reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
			case "get_my_kvsname":
				reply("cmd=my_kvsname kvsname=kvs_42_0 rc=0")
			case "put":
				if kv["kvsname"] != "kvs_42_0" {
					reply("cmd=put_result rc=1 msg=bad_kvsname")
					continue
				}
				f.mu.Lock()
				f.kv[kv["key"]] = kv["value"]
				f.mu.Unlock()
				reply("cmd=put_result rc=0 msg=success")
			case "get":
				f.mu.Lock()
				v, ok := f.kv[kv["key"]]
				f.mu.Unlock()
				if !ok {
					reply("cmd=get_result rc=-1 msg=key_" + kv["key"] + "_not_found")
				} else {
					reply("cmd=get_result rc=0 msg=success value=" + v)
				}
			case "barrier_in":
				f.mu.Lock()
				f.waiting = append(f.waiting, c)
				if len(f.waiting) == f.n {
					for _, w := range f.waiting {
						_, _ = w.Write([]byte("cmd=barrier_out\n"))
					}
					f.waiting = nil
				}
				f.mu.Unlock()
			case "finalize":
				reply("cmd=finalize_ack")
				return
			default:
				reply("cmd=unknown rc=1")
			}
		}
	}()
}

func pmiInfos(n int, env func(r int) *PMIEnv) []Info {
	var infos []Info
	for r := range n {
		infos = append(infos, Info{Launcher: LauncherPMI, Rank: r, Size: n, PMI: env(r), Host: "h", HostID: "h"})
	}
	return infos
}

func TestPMIOverFD(t *testing.T) {
	const n = 3
	f := newFakePMI(t, n)
	fds := make([]int, n)
	for r := range n {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		file := os.NewFile(uintptr(pair[0]), "pmi-server")
		c, err := net.FileConn(file)
		file.Close()
		require.NoError(t, err)
		f.serve(c, -1)
		fds[r] = pair[1] // dialPMI takes ownership
	}
	connectAll(t, pmiInfos(n, func(r int) *PMIEnv { return &PMIEnv{FD: fds[r]} }))
	f.mu.Lock()
	defer f.mu.Unlock()
	addr := f.kv[pmiRDVKey]
	assert.NoError(t, checkAddr(addr), "rank 0 published %q", addr)
	count := map[string]int{}
	for _, c := range f.cmds {
		count[c]++
	}
	assert.Equal(t, n, count["init"])
	assert.Equal(t, n, count["barrier_in"])
	assert.Equal(t, 1, count["put"])
	assert.Equal(t, n-1, count["get"])
	assert.Equal(t, n, count["finalize"], "every rank finalizes at Close")
}

func TestPMIOverPort(t *testing.T) {
	const n = 2
	f := newFakePMI(t, n)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for r := 0; ; r++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.serve(c, r)
		}
	}()
	connectAll(t, pmiInfos(n, func(r int) *PMIEnv {
		return &PMIEnv{FD: -1, Port: ln.Addr().String(), ID: fmt.Sprint(r)}
	}))
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Contains(t, f.cmds, "initack")
}

// TestPMIClientErrors: rc != 0, garbage and a silent server give errors, not panics or hangs.
func TestPMIClientErrors(t *testing.T) {
	script := func(t *testing.T, answers ...string) *PMIEnv {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for _, a := range answers {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				_, _ = c.Write([]byte(a))
			}
			for { // then stay silent until the client hangs up
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
			}
		}()
		return &PMIEnv{FD: -1, Port: ln.Addr().String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	initack := "cmd=initack\ncmd=set size=1\ncmd=set rank=0\ncmd=set debug=0\n"

	_, err := dialPMI(ctx, script(t, initack, "cmd=response_to_init rc=1 msg=nope\n"))
	assert.ErrorIs(t, err, ErrPMI)
	assert.Contains(t, err.Error(), "nope")

	_, err = dialPMI(ctx, script(t, initack, "this is not pmi\n"))
	assert.ErrorIs(t, err, ErrProtocol)

	_, err = dialPMI(ctx, script(t, initack, "cmd=response_to_init rc=0\n", "cmd=my_kvsname rc=0\n"))
	assert.ErrorIs(t, err, ErrProtocol, "kvsname missing")

	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	_, err = dialPMI(short, script(t, initack))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "silent server")

	p, err := dialPMI(ctx, script(t, initack, "cmd=response_to_init rc=0\n", "cmd=my_kvsname kvsname=k rc=0\n",
		"cmd=get_result rc=-1 msg=key_x_not_found\n"))
	require.NoError(t, err)
	assert.Equal(t, 0, p.rank)
	assert.Equal(t, 1, p.size)
	_, err = p.get(ctx, "x")
	assert.ErrorIs(t, err, ErrPMI)
	assert.ErrorIs(t, p.put(ctx, "bad key", "v"), ErrBadEnv)
	p.close()

	_, err = dialPMI(ctx, &PMIEnv{FD: 987654})
	assert.ErrorIs(t, err, ErrBadEnv)
}
