package rma

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/internal/config"
)

// The memory section of `goarmci info`: what one connection of each kind costs at each end with
// the configured providers, from objects created on probe devices as a rank creates them.
func init() {
	config.RegisterSection(config.Section{Title: "memory per connection", Order: 11, Write: writeMemoryEstimates})
}

// MemoryEstimate is the memory of one object of a kind at one end, as a rank creates it
// (the section of `goarmci info`).
type MemoryEstimate struct {
	Kind  string // "RC connection (tcp)", "DC peer (tcp)", ...
	Bytes int64
	What  string // what the bytes are
}

// memoryEstimates creates on probe devices of the configured providers (GOARMCI_RAILS for tcp)
// one object of each kind a rank holds per peer or per device and returns their memory
// (MemoryFootprint): an RC connection and a DC peer over tcp with the stream a pair of ports
// shares, a same-node queue pair over shm, a completion queue and its entry. Errors name the
// provider that could not be opened; the estimates of the others are returned.
func memoryEstimates(c *config.Config) ([]MemoryEstimate, error) {
	var out []MemoryEstimate
	var errs []error
	conn := func(dev *ibv.Context, kind, what string) {
		ep, err := hybridft.NewEndpoint(dev, 1, completionCQE)
		if err == nil {
			var cn *hybridft.Conn
			if cn, err = ep.NewConn(); err == nil {
				out = append(out, MemoryEstimate{kind, cn.MemoryFootprint(), what})
				err = cn.Close()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", kind, err))
		}
	}
	if dev, err := shm.Open(shm.Config{Job: fmt.Sprintf("mem%d", os.Getpid()), Name: "probe", Dir: c.ShmDir}); err != nil {
		errs = append(errs, fmt.Errorf("shm: %w", err))
	} else {
		conn(dev, "node queue pair (shm)", "queue pair and connection record")
		_ = dev.Close()
	}
	dev, err := openProbeTCP(c)
	if err != nil {
		return out, errors.Join(append(errs, fmt.Errorf("tcp: %w", err))...)
	}
	defer dev.Close()
	conn(dev, "RC connection (tcp)", "queue pair (engine state, first work-queue entries) and connection record")
	cq, err := dev.CreateCQ(completionCQE)
	if err != nil {
		return out, errors.Join(append(errs, fmt.Errorf("tcp: %w", err))...)
	}
	pd, err := dev.AllocPD()
	if err == nil {
		var qp *ibv.QP
		if qp, err = pd.CreateQP(ibv.QPInitAttr{Type: ibv.DC, SendCQ: cq, RecvCQ: cq}); err == nil {
			out = append(out, MemoryEstimate{"DC peer (tcp)", qp.DCPeerBytes(), "a peer record of the DC queue pair"})
			err = qp.Destroy()
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("DC peer (tcp): %w", err))
	}
	out = append(out,
		MemoryEstimate{"tcp stream", tcp.StreamBytes(), "record, read buffer, reader and writer goroutines (per pair of ports)"},
		MemoryEstimate{"completion queue", cq.MemoryFootprint(), "record and first entries, while empty (per device)"},
		MemoryEstimate{"CQ entry", ibv.CQEntryBytes(), "per completion waiting beyond the first entries"})
	return out, errors.Join(errs...)
}

func writeMemoryEstimates(w io.Writer, c *config.Config) error {
	est, err := memoryEstimates(c)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tBYTES EACH END\tWHAT")
	for _, e := range est {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Kind, MemorySize(e.Bytes), e.What)
	}
	_ = tw.Flush()
	if err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	}
	return nil
}

// Memory accounting (Runtime.Memory, GOARMCI_STATS): the bytes this rank's communication objects
// hold now, computed from the objects themselves (ibv.QP.MemoryFootprint, ibv.CQ,
// ibv.Context.ConnMemory, the connection manager's), not from the Go heap: what a connection
// costs, by kind, as [Sridhar08] measures memory per connection.

// Kinds of MemoryKind.
const (
	MemRC         = "rc connection"       // a network peer's queue pairs (one per rail) and their connection records
	MemDC         = "dc peer"             // a network peer on the shared datagram path: its DC views (records, address handles, the DC queue pairs' peer records)
	MemDCQP       = "dc queue pair"       // the shared datagram path's DC queue pairs (one per rail), peer records excluded
	MemNodeQP     = "node queue pair"     // a same-node peer's shared-memory queue pair
	MemCQ         = "completion queue"    // the devices' completion queues
	MemStream     = "provider connection" // the provider's byte streams, sockets, buffers, goroutines
	MemCM         = "connection manager"  // the UD connection manager: queue pair, CQs, receive buffers
	MemRegistered = "registered segment"  // memory of the live segments registered with the devices
)

// MemoryStats is the memory this rank's communication objects hold (Runtime.Memory), bytes.
type MemoryStats struct {
	Total int64        `json:"total"`
	Kinds []MemoryKind `json:"kinds"`           // totals by kind, in the order of the Mem* constants, kinds present only
	Peers []PeerMemory `json:"peers,omitempty"` // per connected peer (this rank excluded), rank order
}

// MemoryKind is the memory of the objects of one kind.
type MemoryKind struct {
	Kind  string `json:"kind"` // one of the Mem* constants
	Count int    `json:"count"`
	Bytes int64  `json:"bytes"`
}

// PeerMemory is the memory of the connection to one peer: its queue pairs and connection records.
type PeerMemory struct {
	Rank  int    `json:"rank"`
	QPs   int    `json:"qps"`
	Bytes int64  `json:"bytes"`
	Kind  string `json:"kind"` // MemRC or MemNodeQP
}

// Memory returns what this rank's communication objects hold now: per connected peer, and the
// totals by kind (connections, completion queues, the providers' streams, the connection
// manager, registered segments). The objects' own accounting; the Go heap also holds what the
// runtime allocates per operation, not counted here.
func (r *Runtime) Memory() MemoryStats {
	var ms MemoryStats
	kinds := map[string]*MemoryKind{}
	add := func(kind string, count int, bytes int64) {
		k := kinds[kind]
		if k == nil {
			k = &MemoryKind{Kind: kind}
			kinds[kind] = k
		}
		k.Count += count
		k.Bytes += bytes
	}
	for _, pe := range r.peers {
		if pe.rank == r.rank {
			continue
		}
		pm := PeerMemory{Rank: pe.rank, Kind: MemRC}
		if pe.dc != nil {
			dm := PeerMemory{Rank: pe.rank, Kind: MemDC}
			dm.QPs, dm.Bytes = chanMemory(pe.dc)
			ms.Peers = append(ms.Peers, dm)
			add(dm.Kind, 1, dm.Bytes)
		}
		if rc := r.rcOrNet(pe); rc != nil {
			pm.QPs, pm.Bytes = chanMemory(rc)
		} else if pe.qp != nil {
			pm.Kind, pm.QPs, pm.Bytes = MemNodeQP, 1, pe.qp.MemoryFootprint()
			if pe.conn != nil {
				pm.Bytes = pe.conn.MemoryFootprint()
			}
		}
		if pm.QPs > 0 {
			ms.Peers = append(ms.Peers, pm)
			add(pm.Kind, pm.QPs, pm.Bytes)
		}
	}
	cqs := map[*ibv.CQ]bool{}
	for _, n := range r.nets {
		for _, ep := range n.eps {
			if ep.CQ != nil && !cqs[ep.CQ] {
				cqs[ep.CQ] = true
				add(MemCQ, 1, ep.CQ.MemoryFootprint())
			}
		}
		if conns, b := n.dev.ConnMemory(); conns > 0 {
			add(MemStream, conns, b)
		}
		if k, b := dcQPMemory(n); k > 0 {
			add(MemDCQP, k, b)
		}
		if n.mgr != nil {
			if cm := n.mgr.CM(); cm != nil {
				add(MemCM, 1, cm.MemoryFootprint())
			}
		}
	}
	r.segMu.Lock()
	for _, s := range r.live {
		for _, mr := range s.mrs {
			if mr != nil {
				add(MemRegistered, 1, int64(mr.Length))
			}
		}
	}
	r.segMu.Unlock()
	for _, k := range []string{MemRC, MemDC, MemDCQP, MemNodeQP, MemCQ, MemStream, MemCM, MemRegistered} {
		if m := kinds[k]; m != nil {
			ms.Kinds = append(ms.Kinds, *m)
			ms.Total += m.Bytes
		}
	}
	return ms
}

// writeMemory prints ms as GOARMCI_STATS's text does: the total, one line per kind (with the
// bytes per object), one line per connected peer.
func writeMemory(b *strings.Builder, ms MemoryStats) {
	fmt.Fprintf(b, "  memory of the communication objects: %s\n", MemorySize(ms.Total))
	for _, k := range ms.Kinds {
		fmt.Fprintf(b, "    %s: %d, %s (%s each)\n", k.Kind, k.Count, MemorySize(k.Bytes), MemorySize(k.Bytes/int64(max(k.Count, 1))))
	}
	for _, p := range ms.Peers {
		fmt.Fprintf(b, "    to rank %d (%s): %d queue pairs, %s\n", p.Rank, p.Kind, p.QPs, MemorySize(p.Bytes))
	}
}

// MemorySize formats n bytes for reading: "812 B", "4.7 KiB", "1.2 MiB", "3.0 GiB".
func MemorySize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
