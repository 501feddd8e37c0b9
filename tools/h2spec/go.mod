// h2spec, the HTTP/2 conformance suite of tests/integration/h2/test_h2_spec.py,
// built by tools/deps.sh test (go build github.com/summerwind/h2spec/cmd/h2spec
// in this folder). h2spec has no go.mod of its own, so `go install ...@latest`
// takes the newest version of each of its imports, and the newest
// golang.org/x/sys needs a newer Go than Debian 12's golang-go (1.19). The
// versions below build with Go 1.19 and later; go.sum pins their contents.
module monkey/tools/h2spec

go 1.19

require (
	github.com/fatih/color v1.15.0
	github.com/mattn/go-colorable v0.1.13
	github.com/mattn/go-isatty v0.0.19
	github.com/spf13/cobra v1.7.0
	github.com/spf13/pflag v1.0.5
	github.com/summerwind/h2spec v2.2.1+incompatible
	golang.org/x/net v0.17.0
	golang.org/x/sys v0.13.0
	golang.org/x/text v0.13.0
)
