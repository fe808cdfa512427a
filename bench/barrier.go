package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/goarmci/goarmci/rma"
)

// allBarrierAlgs are the algorithms of the barrier benchmark, by name ([Kini03 §3] in docs/references.md).
// BarrierMessage comes last: above 256 ranks its resends and NAKs slow the barriers measured
// after it in a simulated job (see bench/README.md).
var allBarrierAlgs = []rma.BarrierAlg{rma.BarrierDissemination, rma.BarrierPairwise, rma.BarrierGatherBroadcast,
	rma.BarrierRGM, rma.BarrierMessagePairwise, rma.BarrierMessage}

// autoBarrier is the -alg name of the algorithm Barrier runs (GOARMCI_BARRIER, auto by default:
// what MPI_Barrier and GA_Sync are compared with).
const autoBarrier = "auto"

// BarrierAlgs resolves the -alg option (errors wrap ErrOptions): "" or "all" = every algorithm
// but the point-to-point baselines BarrierMessage and BarrierMessagePairwise (they need a network
// device on every rank: ask for them by name), else a comma list; "auto" in it is no algorithm of
// its own (runBarrier measures Barrier for it).
func BarrierAlgs(spec string) ([]rma.BarrierAlg, error) {
	if spec == "" || spec == "all" {
		return allBarrierAlgs[:len(allBarrierAlgs)-2], nil
	}
	var out []rma.BarrierAlg
	for _, name := range strings.Split(spec, ",") {
		if strings.TrimSpace(name) == autoBarrier {
			continue
		}
		found := false
		for _, a := range allBarrierAlgs {
			if a.String() == strings.TrimSpace(name) {
				out = append(out, a)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: barrier algorithm %q (have auto, dissemination, pairwise, gather-broadcast, rgm, message, message-pairwise)", ErrOptions, name)
		}
	}
	return out, nil
}

func barrierAlgName(spec string) string {
	algs, err := BarrierAlgs(spec)
	if err != nil {
		return spec
	}
	var names []string
	if hasAuto(spec) {
		names = append(names, "auto (Barrier's choice)")
	}
	for _, a := range algs {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ") + " ([Kini03 §3])"
}

// hasAuto reports whether the -alg list names auto.
func hasAuto(spec string) bool {
	for _, name := range strings.Split(spec, ",") {
		if strings.TrimSpace(name) == autoBarrier {
			return true
		}
	}
	return false
}

// runBarrier measures each algorithm's latency on all ranks of the job: one row keyed by the
// number of ranks, one column per algorithm. The value is rank 0's mean time per barrier.
func runBarrier(ctx context.Context, rt *rma.Runtime, o Options) ([]string, []Row, error) {
	algs, err := BarrierAlgs(o.BarrierAlg)
	if err != nil {
		return nil, nil, err
	}
	iters, skip := o.Counts(Latency, 0)
	row := Row{Size: rt.Size()}
	var cols []string
	measure := func(name string, barrier func() error) error {
		cols = append(cols, name+" (us)")
		us, err := timeCalls(ctx, rt, o.Settle, iters, skip, barrier)
		if err != nil {
			return fmt.Errorf("bench: barrier %s: %w", name, err)
		}
		row.Values = append(row.Values, us)
		return nil
	}
	if hasAuto(o.BarrierAlg) {
		if err := measure(autoBarrier+" "+rt.BarrierAlg().String(), func() error { return rt.Barrier(ctx) }); err != nil {
			return nil, nil, err
		}
	}
	for _, alg := range algs {
		if err := measure(alg.String(), func() error { return rt.BarrierWith(ctx, alg) }); err != nil {
			return nil, nil, err
		}
	}
	return cols, []Row{row}, nil
}
