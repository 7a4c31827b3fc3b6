package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox"
)

// sandboxCommand runs the demo companies, the EID simulator and their tester routes on their
// own, for a connector started with --sandbox=false --companies-url pointing here.
func sandboxCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Run the sandbox companies and the electronic-ID simulator standalone", Args: cobra.NoArgs}
	cfg := bindConfig(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		addr := cfg.SandboxAddr
		if addr == "127.0.0.1:0" {
			addr = "127.0.0.1:8090" // a standalone sandbox needs an address others can be told
		}
		sb, err := sandbox.Start(ctx, sandbox.WithAddr(addr), sandbox.WithLogger(logger),
			sandbox.WithLatency(0, time.Duration(cfg.SandboxLatencyMS)*time.Millisecond),
			sandbox.WithMockSignDelay(cfg.MockSignDelay), sandbox.WithEIDOrderTimeout(cfg.EIDOrderTimeout))
		if err != nil {
			return err
		}
		defer sb.Close()
		fmt.Fprintf(stdout, "Sandbox companies at %s/sandbox/companies\nPoint a connector at it with --sandbox=false --companies-url %s\n", sb.URL(), sb.URL())
		<-ctx.Done()
		return nil
	}
	cmd.AddCommand(sandboxPDFCommand(stdout))
	return cmd
}

// sandboxPDFCommand writes an insurance letter in the layout the sandbox parses for PDF_UPLOAD.
func sandboxPDFCommand(stdout io.Writer) *cobra.Command {
	var opts pdfletter.SampleOptions
	var broken, out string
	cmd := &cobra.Command{
		Use:   "pdf",
		Short: "Write an insurance letter in the sandbox layout (for PDF_UPLOAD)",
		Long: "Writes a real PDF with a text layer. --broken FIELD makes that field unreadable (the " +
			"collection ends FAILED_PDF_PARSE); --not-a-letter writes a PDF that is no insurance letter " +
			"(FAILED_PDF_USER_INPUT).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Broken = pdfletter.Field(broken)
			w := stdout
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return fmt.Errorf("create %s: %w", out, err)
				}
				defer f.Close()
				w = f
			}
			return pdfletter.WriteSample(w, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Company, "company", "", "company printed on the letter (default Demo Försäkring)")
	cmd.Flags().StringVar(&opts.Holder, "holder", "", "insurance holder (default Tolvan Tolvansson)")
	cmd.Flags().StringVar(&opts.InsuranceType, "type", "", "insurance type, e.g. HOME, CAR, ACCIDENT, PET (default HOME)")
	cmd.Flags().StringVar(&broken, "broken", "", "make one field unreadable: company, insuranceType, insuranceNumber, holder, premium or renewalDate")
	cmd.Flags().BoolVar(&opts.NotALetter, "not-a-letter", false, "write a PDF that is not an insurance letter")
	cmd.Flags().StringVarP(&out, "output", "o", "-", "file to write, - for standard output")
	return cmd
}
