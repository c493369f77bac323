package template

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/docker/cli/pkg/kvfile"
)

// TestRawEnvFileReadsAsDockerRun holds parseRawEnvFile to docker/cli's
// kvfile, the parser `docker run --env-file` and `docker compose`'s
// format: raw use, line for line: the values each takes, and whether each
// fails.
func TestRawEnvFileReadsAsDockerRun(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "FROM_LOOKUP" {
			return "looked up", true
		}
		return "", false
	}
	cases := []string{
		"A=1\nB=two words \n",
		"\ufeffBOM=first line\n",
		"  # a comment\n\n\t  INDENTED=x\n",
		`QUOTED="kept" ` + "\nDOLLAR=${HOME}/$X\n",
		"FROM_LOOKUP\nNOT_SET\n",
		"EMPTY=\nEQ=a=b=c\n",
		"=novalue\n",
		"BAD NAME=1\n",
		"TRAILING\t=1\n",
		"UTF8=\xff\xfe\n",
		"A=1\nA=2\n",
		"no-newline-at-end=1",
	}
	for _, text := range cases {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			want := map[string]string{}
			lines, wantErr := kvfile.ParseFromReader(strings.NewReader(text), lookup)
			for _, l := range lines {
				k, v, _ := strings.Cut(l, "=")
				want[k] = v
			}
			got := map[string]string{}
			err := parseRawEnvFile(strings.NewReader(text), "x.env", got, lookup)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, docker's %v", err, wantErr)
			}
			if wantErr == nil && !maps.Equal(got, want) {
				t.Fatalf("read %q, docker reads %q", got, want)
			}
		})
	}
}
