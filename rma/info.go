package rma

import (
	"fmt"
	"io"
	"os"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/internal/config"
)

// The providers section of `goarmci info`: each provider this build has, and the ports (rails)
// the network provider would open with the current configuration, with their state.
func init() {
	config.RegisterSection(config.Section{Title: "providers and rails", Order: 10, Write: writeProviders})
}

func writeProviders(w io.Writer, c *config.Config) error {
	fmt.Fprintln(w, "PROVIDER  USE                                   DEVICE")
	job := fmt.Sprintf("info%d", os.Getpid())
	if dev, err := shm.Open(shm.Config{Job: job, Name: "probe", Dir: c.ShmDir}); err != nil {
		fmt.Fprintf(w, "shm       ranks of one node (one copy)          unavailable: %v\n", err)
	} else {
		a := dev.QueryDevice()
		fmt.Fprintf(w, "shm       ranks of one node (one copy)          %s, %d port, max MR %d MiB\n", a.Name, a.PhysPortCnt, a.MaxMRSize>>20)
		_ = dev.Close()
	}
	dev, err := openProbeTCP(c)
	if err != nil {
		fmt.Fprintf(w, "tcp       ranks of other nodes (RC over TCP)    unavailable: %v\n", err)
		return nil
	}
	defer dev.Close()
	a := dev.QueryDevice()
	fmt.Fprintf(w, "tcp       ranks of other nodes (RC over TCP)    %s, %d port(s)\n", a.Name, a.PhysPortCnt)
	fmt.Fprintln(w, "\nRAIL  PORT  STATE   ADDRESS                 LID  MTU")
	for i := 1; i <= a.PhysPortCnt; i++ {
		pa, err := dev.QueryPort(uint8(i))
		if err != nil {
			continue
		}
		fmt.Fprintf(w, "%-5d %-5d %-7v %-23s %-4d %d\n", i-1, pa.Num, portState(pa.State), pa.Addr, pa.LID, pa.MTU)
	}
	return nil
}

// openProbeTCP opens the tcp device a rank would open with c's rails (GOARMCI_RAILS), for the
// report.
func openProbeTCP(c *config.Config) (*ibv.Context, error) {
	rails := c.Rails
	if len(rails) == 0 {
		rails = []string{defaultRail()}
	}
	var ports []tcp.PortConfig
	for _, r := range rails {
		ports = append(ports, tcp.PortConfig{Listen: listenAddr(r)})
	}
	return tcp.Open(tcp.Config{Name: "probe", Ports: ports})
}

func portState(s ibv.PortState) string { return s.String() }
