// promrules-check runs the checks of `promtool check rules` (Prometheus v3, module
// github.com/prometheus/prometheus, see versions.env) without the rest of promtool.
//
// It calls the same library functions as promtool's cmd/promtool/main.go (CheckRules, checkRules,
// checkRulesFromStdin, checkRuleGroups, checkDuplicates):
//
//   - rulefmt.ParseFile / rulefmt.Parse with the same arguments (UTF-8 name validation, the PromQL
//     parser built from the same parser.Options, unknown fields refused unless
//     --ignore-unknown-fields). rulefmt does the real work: strict YAML decoding, group checks (empty
//     or repeated names, label names and values), rule checks (record xor alert, expr parsed by the
//     PromQL parser, recording-rule restrictions and name, label and annotation names) and a parse
//     of every alerting rule's label and annotation templates with Prometheus' template expander.
//   - the "duplicate-rules" lint (on by default, as in promtool): two rules with the same
//     record/alert name and the same group+rule labels. promtool builds the label set with
//     rules.FromMaps (merge the maps, then labels.FromMap); that is re-done below with
//     labels.FromMap so the program does not link the rule manager.
//
// Flags, output lines and exit codes are promtool's: 0 success, 1 errors, 3 lint problems with
// --lint-fatal. With no file arguments the rules are read from standard input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	successExitCode = 0
	failureExitCode = 1
	lintErrExitCode = 3
)

var errLint = errors.New("lint error")

type settings struct {
	duplicateRules      bool
	fatal               bool
	ignoreUnknownFields bool
}

func main() {
	// As promtool's init(): the legacy global scheme is UTF-8.
	//nolint:staticcheck
	model.NameValidationScheme = model.UTF8Validation

	lint := flag.String("lint", "duplicate-rules", "Linting checks to apply: all, duplicate-rules, none.")
	lintFatal := flag.Bool("lint-fatal", false, "Make lint errors exit with exit code 3.")
	ignoreUnknown := flag.Bool("ignore-unknown-fields", false, "Ignore unknown fields in the rule files.")
	showVersion := flag.Bool("version", false, "Print the Prometheus module this checker is built from, and exit.")
	features := flag.String("enable-feature", "", "Comma separated PromQL parser features: promql-experimental-functions, promql-binop-fill-modifiers, promql-unquoted-utf8-names.")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] [rule-file ...]   (the checks of `promtool check rules`; stdin when no file)\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *showVersion {
		fmt.Println("promrules-check", prometheusModule())
		os.Exit(successExitCode)
	}

	s := settings{fatal: *lintFatal, ignoreUnknownFields: *ignoreUnknown}
	for setting := range strings.SplitSeq(*lint, ",") {
		switch setting {
		case "all", "duplicate-rules":
			s.duplicateRules = true
		case "none", "":
		default:
			fmt.Printf("WARNING: unknown lint option: %q\n", setting)
		}
	}
	opts := parser.Options{}
	for f := range strings.SplitSeq(*features, ",") {
		switch f {
		case "promql-experimental-functions":
			opts.EnableExperimentalFunctions = true
		case "promql-binop-fill-modifiers":
			opts.EnableBinopFillModifiers = true
		case "promql-unquoted-utf8-names":
			opts.EnableUnquotedUTF8Names = true
		case "":
		default:
			fmt.Printf("  WARNING: Unknown feature passed to --enable-feature: %s", f)
		}
	}
	p := parser.NewParser(opts)
	logger := promslog.New(&promslog.Config{})

	failed, hasErrors := false, false
	if flag.NArg() == 0 {
		fmt.Println("Checking standard input")
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "  FAILED:", err)
			os.Exit(failureExitCode)
		}
		rgs, errs := rulefmt.Parse(data, s.ignoreUnknownFields, model.UTF8Validation, p, logger)
		failed, hasErrors = report(rgs, errs, s)
	} else {
		for _, f := range flag.Args() {
			fmt.Println("Checking", f)
			rgs, errs := rulefmt.ParseFile(f, s.ignoreUnknownFields, model.UTF8Validation, p, logger)
			fileFailed, fileHasErrors := report(rgs, errs, s)
			failed = failed || fileFailed
			hasErrors = hasErrors || fileHasErrors
		}
	}
	switch {
	case failed && hasErrors:
		os.Exit(failureExitCode)
	case failed && s.fatal:
		os.Exit(lintErrExitCode)
	}
	os.Exit(successExitCode)
}

// report prints the outcome for one input as promtool's checkRules does.
func report(rgs *rulefmt.RuleGroups, errs []error, s settings) (failed, hasErrors bool) {
	if errs != nil {
		failed = true
		fmt.Fprintln(os.Stderr, "  FAILED:")
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, e.Error())
			hasErrors = hasErrors || !errors.Is(e, errLint)
		}
		if hasErrors {
			return failed, hasErrors
		}
	}
	if n, errs := checkRuleGroups(rgs, s); errs != nil {
		fmt.Fprintln(os.Stderr, "  FAILED:")
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, e.Error())
		}
		failed = true
		for _, e := range errs {
			hasErrors = hasErrors || !errors.Is(e, errLint)
		}
	} else {
		fmt.Printf("  SUCCESS: %d rules found\n", n)
	}
	fmt.Println()
	return failed, hasErrors
}

// checkRuleGroups counts the rules and applies the duplicate-rules lint (promtool's checkRuleGroups).
func checkRuleGroups(rgs *rulefmt.RuleGroups, s settings) (int, []error) {
	n := 0
	for _, rg := range rgs.Groups {
		n += len(rg.Rules)
	}
	if s.duplicateRules {
		if dups := duplicates(rgs.Groups); len(dups) != 0 {
			var msg strings.Builder
			fmt.Fprintf(&msg, "%d duplicate rule(s) found.\n", len(dups))
			for _, d := range dups {
				fmt.Fprintf(&msg, "Metric: %s\nLabel(s):\n", d.metric)
				d.labels.Range(func(l labels.Label) { fmt.Fprintf(&msg, "\t%s: %s\n", l.Name, l.Value) })
			}
			msg.WriteString("Might cause inconsistency while recording expressions")
			return 0, []error{fmt.Errorf("%w %s", errLint, msg.String())}
		}
	}
	return n, nil
}

type ruleKey struct {
	metric string
	labels labels.Labels
}

func compareKeys(a, b ruleKey) int {
	if c := strings.Compare(a.metric, b.metric); c != 0 {
		return c
	}
	return labels.Compare(a.labels, b.labels)
}

// duplicates is promtool's checkDuplicates: sort the (name, labels) keys, report each repeated one once.
func duplicates(groups []rulefmt.RuleGroup) []ruleKey {
	var keys []ruleKey
	for _, g := range groups {
		for _, r := range g.Rules {
			name := r.Record
			if r.Alert != "" {
				name = r.Alert
			}
			merged := maps.Clone(g.Labels)
			if merged == nil {
				merged = map[string]string{}
			}
			maps.Copy(merged, r.Labels)
			keys = append(keys, ruleKey{metric: name, labels: labels.FromMap(merged)})
		}
	}
	var dups []ruleKey
	if len(keys) < 2 {
		return dups
	}
	slices.SortFunc(keys, compareKeys)
	for i := 1; i < len(keys); i++ {
		if compareKeys(keys[i-1], keys[i]) == 0 && (len(dups) == 0 || compareKeys(keys[i-1], dups[len(dups)-1]) != 0) {
			dups = append(dups, keys[i])
		}
	}
	return dups
}

// prometheusModule names the github.com/prometheus/prometheus module version linked in, e.g.
// "github.com/prometheus/prometheus v0.316.0" (module v0.3XX.Y is Prometheus release 3.XX.Y).
func prometheusModule() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/prometheus/prometheus" {
				return dep.Path + " " + dep.Version
			}
		}
	}
	return "github.com/prometheus/prometheus (unknown version)"
}
