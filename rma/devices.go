package rma

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/multirail"
)

// openShm opens the node's shared-memory device; segments are then allocated from shareable
// memory so node peers reach them with one copy.
func (r *Runtime) openShm() error {
	dev, err := shm.Open(shm.Config{Job: r.cfg.Job, Name: fmt.Sprintf("rank%d", r.rank), Dir: r.cfg.ShmDir})
	if err != nil {
		return err
	}
	alloc := func(n int) ([]byte, func() error, error) {
		b, err := shm.AllocBuffer(n)
		if err != nil {
			return nil, nil, err
		}
		return b, func() error { return shm.FreeBuffer(b) }, nil
	}
	return r.addNetwork(TransportShm, dev, alloc)
}

// openNet opens the network device with one port per rail (GOARMCI_RAILS / Config.Rails: an
// interface name, an IP or an ip:port each; default defaultRail()). Every peer reached through
// the network gets one RC connection per rail, the subchannels of its multirail channel ([Vishnu07]
// §4.1.1).
//
// With Config.NetworkDevice set it opens that device instead, with the hybridft manager on its
// UD queue pairs when Config.NetworkDeviceFT is set; errors wrap ErrConfig when it returns no
// device.
func (r *Runtime) openNet() error {
	if r.cfg.NetworkDevice != nil {
		dev, err := r.cfg.NetworkDevice()
		if err != nil {
			return fmt.Errorf("network device: %w", err)
		}
		if dev == nil {
			return fmt.Errorf("%w: Config.NetworkDevice returned no device", ErrConfig)
		}
		if !r.cfg.NetworkDeviceFT || !r.cfg.env.cfg.FT {
			return r.addNetwork(TransportTCP, dev, nil)
		}
		r.closers = append(r.closers, dev.Close)
		o := ftOptions(r.cfg.env.cfg)
		o.CMDevice = dev
		return r.addManaged(dev, o)
	}
	rails := r.cfg.Rails
	if len(rails) == 0 {
		rails = []string{defaultRail()}
	}
	var ports []tcp.PortConfig
	for _, rail := range rails {
		pc, err := railPort(rail)
		if err != nil {
			return err
		}
		pc.LMC = lmcFor(r.cfg.Paths) // one stream per path (paths.go)
		ports = append(ports, pc)
	}
	// The ACK timeout floor is GOARMCI_ACK_TIMEOUT (default 50 ms): the engine's own 10 ms floor
	// gives up on a loaded two-core machine while several rails carry 64 MiB bursts both ways.
	// RC segments are tcp.DefaultSegmentSize (1 MiB) on every rank: a message of a segment or
	// more is read from the socket straight into its memory region, one wake-up per segment;
	// shorter ones travel as 4 KiB packets, read many at a time.
	// The stream readers never poll: this rank's waits drive them (tcp.Progress, r.progress).
	tl := r.log.With().Str("module", "tcp").Logger() // refused streams (tcp.Rejected) are logged
	dev, err := tcp.Open(tcp.Config{Name: fmt.Sprintf("tcp-rank%d", r.rank), Ports: ports, Log: &tl,
		TimeoutFloor: r.cfg.env.cfg.AckTimeout, SegmentSize: tcp.DefaultSegmentSize,
		Secret: r.secret.Bytes()})
	if err != nil {
		return err
	}
	if !r.cfg.env.cfg.FT { // GOARMCI_FT=false: plain RC connections, no manager
		return r.addNetwork(TransportTCP, dev, nil)
	}
	r.closers = append(r.closers, dev.Close)
	// Hybrid network fault tolerance [Vishnu09]: the manager's UD connection manager listens on
	// every rail.
	o := ftOptions(r.cfg.env.cfg)
	for _, pc := range ports {
		host, _, _ := net.SplitHostPort(pc.Listen)
		o.CMListen = append(o.CMListen, net.JoinHostPort(host, "0"))
	}
	return r.addManaged(dev, o)
}

// addManaged adds the network of dev (already among the closers) under a hybridft manager of
// options o (its connection manager on o.CMListen or o.CMDevice): APM, software recovery,
// partitions, on-demand connections [Vishnu09 §IV]. The manager is closed before the device
// (closers run in reverse).
func (r *Runtime) addManaged(dev *ibv.Context, o hybridft.Options) error {
	o.Secret = r.secret.Bytes()
	lg := r.log.With().Str("module", "hybridft").Logger()
	o.Log = &lg
	m, err := hybridft.NewManager(o)
	if err != nil {
		return err
	}
	r.closers = append(r.closers, m.Close)
	ep, err := m.NewEndpoint(dev, 1, completionCQE)
	if err != nil {
		return err
	}
	if err := r.addEndpoint(TransportTCP, ep, nil); err != nil {
		return err
	}
	r.nets[len(r.nets)-1].mgr = m
	return nil
}

// railPort turns one rail (interface name, IP, or ip:port) into a tcp port configuration: an
// interface listens on its first IPv4 address (else its first address).
func railPort(rail string) (tcp.PortConfig, error) {
	if _, _, err := net.SplitHostPort(rail); err == nil {
		return tcp.PortConfig{Listen: rail}, nil
	}
	if ip := net.ParseIP(rail); ip != nil {
		return tcp.PortConfig{Listen: net.JoinHostPort(rail, "0")}, nil
	}
	ifc, err := net.InterfaceByName(rail)
	if err != nil {
		return tcp.PortConfig{}, fmt.Errorf("%w: rail %q is neither an address nor an interface: %w", ErrConfig, rail, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return tcp.PortConfig{}, fmt.Errorf("%w: rail %q: %w", ErrConfig, rail, err)
	}
	var pick net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ipn.IP.To4() != nil {
				pick = ipn.IP
				break
			}
			if pick == nil && !ipn.IP.IsLinkLocalUnicast() {
				pick = ipn.IP
			}
		}
	}
	if pick == nil {
		return tcp.PortConfig{}, fmt.Errorf("%w: rail %q: interface has no usable address", ErrConfig, rail)
	}
	return tcp.PortConfig{Listen: net.JoinHostPort(pick.String(), "0"), Ifname: rail}, nil
}

func (r *Runtime) addNetwork(kind Transport, dev *ibv.Context, alloc func(int) ([]byte, func() error, error)) error {
	r.closers = append(r.closers, dev.Close)
	ep, err := hybridft.NewEndpoint(dev, 1, completionCQE)
	if err != nil {
		return err
	}
	return r.addEndpoint(kind, ep, alloc)
}

// addEndpoint adds a network over ep's device with one endpoint per port (rail) — on the network
// (TransportTCP) one per (rail, path), Config.Paths per rail (paths.go) — all sharing the
// device's PD and completion queue (and, for a fault-tolerant endpoint, its recovery state).
// Errors wrap ErrConfig (ports without the LIDs the paths need).
func (r *Runtime) addEndpoint(kind Transport, ep *hybridft.Endpoint, alloc func(int) ([]byte, func() error, error)) error {
	eps := []*hybridft.Endpoint{ep}
	if kind == TransportTCP {
		var err error
		if eps, err = r.pathEndpoints(ep); err != nil {
			return err
		}
	} else {
		for p := 2; p <= ep.Dev.QueryDevice().PhysPortCnt; p++ {
			eps = append(eps, ep.WithPort(uint8(p)))
		}
	}
	n := multirail.NewNetwork(ep)
	if pr, err := tcp.Progress(ep.Dev); err == nil {
		// flag waits make the call between their yields (yieldUntil); a wait for a network
		// completion polls its completion queue for up to GOARMCI_TCP_POLL, making it, before it
		// parks
		r.progress = append(r.progress, pr)
		n.SetProgress(pr, r.tcpPoll())
		if r.arrived == nil {
			r.arrived = make(chan struct{}, 1)
		}
		if err := tcp.OnArrival(ep.Dev, r.onArrival); err != nil {
			return err
		}
	}
	r.nets = append(r.nets, &network{kind: kind, dev: ep.Dev, ep: ep, eps: eps, net: n, alloc: alloc})
	return nil
}

// defaultRail is the address to listen on when no rails are configured: the source address
// the kernel would use towards the rendezvous (GOARMCI_RDV), which is routable from the other
// hosts of the job; else loopback. Connecting a UDP socket sends nothing.
func defaultRail() string {
	rdv := os.Getenv("GOARMCI_RDV")
	if rdv == "" {
		return "127.0.0.1"
	}
	c, err := net.Dial("udp", rdv)
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
		return a.IP.String()
	}
	return "127.0.0.1"
}

// listenAddr turns a rail ("ip" or "ip:port") into a listen address.
func listenAddr(rail string) string {
	if _, _, err := net.SplitHostPort(rail); err == nil {
		return rail
	}
	return net.JoinHostPort(rail, "0")
}

// tcpPoll is how long a wait for a network completion polls before it parks (GOARMCI_TCP_POLL;
// multirail.Network.SetProgress): auto polls 50 µs when this machine runs at most as many ranks
// as it has cores, else parks at once (a polling rank would take the core of the rank it waits
// for).
func (r *Runtime) tcpPoll() time.Duration {
	switch v := r.cfg.env.cfg.TCPPoll; v {
	case "off":
		return 0
	case "", "auto":
		// ranks on this machine, not this node: the testbed's namespaces are nodes that share
		// the machine's cores, and polling ranks of several "nodes" starve each other
		if r.machineRanks <= runtime.NumCPU() {
			return 50 * time.Microsecond
		}
		return 0
	default:
		d, _ := time.ParseDuration(v)
		return d
	}
}

// ftOptions maps the GOARMCI_* configuration to the fault-tolerance manager's options (CMListen
// and Log are left to the caller: one address per rail). GOARMCI_PARTITION_TIMEOUT=0 (set
// explicitly) becomes a negative PartitionTimeout: no partition timeout, the consumer's context
// bounds the wait.
func ftOptions(c config.Config) hybridft.Options {
	pt := c.PartitionTimeout
	if pt == 0 {
		pt = -1
	}
	return hybridft.Options{APM: c.APM, APMTest: c.APMTest, PartitionTimeout: pt,
		AckTimeout: c.AckTimeout, RetryCount: c.RetryCount}
}
