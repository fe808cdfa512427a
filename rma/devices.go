package rma

import (
	"fmt"
	"net"
	"os"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/multirail"
)

// openShm opens the node's shared-memory device; segments are then allocated from shareable
// memory so node peers reach them with one copy.
func (r *Runtime) openShm() error {
	dev, err := shm.Open(shm.Config{Job: r.cfg.Job, Name: fmt.Sprintf("rank%d", r.rank)})
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

// openNet opens the network device with one port per rail.
func (r *Runtime) openNet() error {
	rails := r.cfg.Rails
	if len(rails) == 0 {
		rails = []string{defaultRail()}
	}
	var ports []tcp.PortConfig
	for _, ip := range rails {
		ports = append(ports, tcp.PortConfig{Listen: listenAddr(ip)})
	}
	dev, err := tcp.Open(tcp.Config{Name: fmt.Sprintf("tcp-rank%d", r.rank), Ports: ports})
	if err != nil {
		return err
	}
	return r.addNetwork(TransportTCP, dev, nil)
}

func (r *Runtime) addNetwork(kind Transport, dev *ibv.Context, alloc func(int) ([]byte, func() error, error)) error {
	r.closers = append(r.closers, dev.Close)
	ep, err := hybridft.NewEndpoint(dev, 1, completionCQE)
	if err != nil {
		return err
	}
	r.nets = append(r.nets, &network{kind: kind, dev: dev, ep: ep, net: multirail.NewNetwork(ep), alloc: alloc})
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
