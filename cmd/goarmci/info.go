package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/internal/config"
	_ "github.com/goarmci/goarmci/rma" // registers the providers-and-rails section
)

func newInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "print the launcher detected, every configuration knob, network interfaces and providers",
		Long: `info prints what a rank started here would see: the launcher detected and this
process's rank and size; every GOARMCI_* knob with its value, default, type, unit and doc;
the convention of byte sizes; warnings about unknown GOARMCI_* variables; network interfaces with their link state; and the
sections other packages register (devices, ports, rails, providers). It exits 1 when the
environment has a bad value (every bad value is named, after the whole report), 0 otherwise;
unknown GOARMCI_* variables are warnings, not errors.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("info: takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeInfo(cmd.OutOrStdout())
		},
	}
}

// writeInfo prints the report; a bad environment gives an exitError with code 1 after the
// whole report is printed.
func writeInfo(w io.Writer) error {
	var problems []string

	fmt.Fprintln(w, "== launcher")
	info, err := bootstrap.Detect()
	if err != nil {
		problems = append(problems, err.Error())
		fmt.Fprintf(w, "error: %v\n", err)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "launcher\t%s\n", info.Launcher)
		fmt.Fprintf(tw, "rank\t%d of %d\n", info.Rank, info.Size)
		fmt.Fprintf(tw, "local rank\t%s of %s\n", orUnknown(info.LocalRank), orUnknown(info.LocalSize))
		fmt.Fprintf(tw, "job id\t%s\n", orNone(info.JobID))
		fmt.Fprintf(tw, "host\t%s\n", info.Host)
		fmt.Fprintf(tw, "host id\t%s\n", info.HostID)
		fmt.Fprintf(tw, "rendezvous\t%s\n", rendezvousDesc(info))
		tw.Flush()
	}

	fmt.Fprintln(w, "\n== configuration")
	c, warns, err := config.FromEnv()
	if err != nil {
		problems = append(problems, err.Error())
		fmt.Fprintf(w, "error: %v\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tVALUE\tDEFAULT\tTYPE\tUNIT\tDOC")
	for _, k := range config.Knobs() {
		val := k.Value(&c)
		if k.Launcher {
			val = os.Getenv(k.Name)
		}
		if k.Secret && val != "" {
			val = "(set, not shown)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, orDash(val), orDash(k.Default), k.Type, orDash(k.Unit), k.Doc)
	}
	tw.Flush()
	fmt.Fprintf(w, "sizes: %s\n", config.ByteSizes)
	for _, wn := range warns {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
	// Launcher variables the bootstrap does not read without the others are still checked.
	if v := os.Getenv(config.EnvRDVDir); v != "" && !filepath.IsAbs(v) {
		msg := fmt.Sprintf("config: bad value: %s=%q: want an absolute directory path", config.EnvRDVDir, v)
		problems = append(problems, msg)
		fmt.Fprintf(w, "error: %s\n", msg)
	}
	for _, k := range config.Knobs() {
		if v, set := os.LookupEnv(k.Name); k.Launcher && k.Type == "int" && set && v != "" {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 {
				msg := fmt.Sprintf("config: bad value: %s=%q: want a non-negative integer", k.Name, v)
				problems = append(problems, msg)
				fmt.Fprintf(w, "error: %s\n", msg)
			}
		}
	}

	fmt.Fprintln(w, "\n== network interfaces")
	writeInterfaces(w)

	for _, s := range config.Sections() {
		fmt.Fprintf(w, "\n== %s\n", s.Title)
		if s.Write == nil {
			continue
		}
		if err := s.Write(w, &c); err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
		}
	}
	if len(config.Sections()) == 0 {
		fmt.Fprintln(w, "\n== providers\n(none registered in this build)")
	}
	if len(problems) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("info: bad environment: %s", strings.Join(problems, "; "))}
	}
	return nil
}

func writeInterfaces(w io.Writer) {
	ifs, err := net.Interfaces()
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tMTU\tSPEED\tFLAGS\tADDRESSES")
	for _, ifc := range ifs {
		var addrs []string
		as, _ := ifc.Addrs()
		for _, a := range as {
			addrs = append(addrs, a.String())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", ifc.Name, linkState(ifc), ifc.MTU, linkSpeed(ifc.Name),
			ifc.Flags, orDash(strings.Join(addrs, " ")))
	}
	tw.Flush()
}

// linkState is the kernel's operstate (up, down, lowerlayerdown, unknown, ...), else derived
// from the interface flags.
func linkState(ifc net.Interface) string {
	if b, err := os.ReadFile(filepath.Join("/sys/class/net", ifc.Name, "operstate")); err == nil {
		s := strings.TrimSpace(string(b))
		if s == "unknown" && ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagRunning != 0 {
			return "up (operstate unknown)"
		}
		return s
	}
	if ifc.Flags&net.FlagRunning != 0 {
		return "up"
	}
	return "down"
}

// linkSpeed is the link speed from sysfs ("10000Mb/s"), "-" when the driver does not say.
func linkSpeed(name string) string {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "speed"))
	if err != nil {
		return "-"
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.HasPrefix(s, "-") {
		return "-"
	}
	return s + "Mb/s"
}

func rendezvousDesc(info bootstrap.Info) string {
	switch {
	case info.RDV != "":
		return info.RDV + " (GOARMCI_RDV)"
	case info.PMI != nil:
		return "published by rank 0 in the PMI-1 key-value space"
	case info.Launcher == bootstrap.LauncherSlurm:
		return "rank 0 on the first host of " + orNone(info.Nodelist) + " at a port derived from the job id"
	case info.RDVFile != "":
		return "rank 0 writes its address to " + info.RDVFile
	case info.Size == 1:
		return "in-process (single rank)"
	}
	return "-"
}

func orUnknown(n int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
