package junittest

import (
	"strings"
	"testing"
)

// TestCheckCatchesViolations makes sure the checker is not a rubber
// stamp.
func TestCheckCatchesViolations(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`<testsuite name="x" tests="0"/>`, "root is <testsuite>"},
		{`<testsuites><testsuite tests="0" failures="0" errors="0" skipped="0" time="0"/></testsuites>`, "attribute name is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="0" time="0"><testcase name="a" time="1"/></testsuite></testsuites>`, "attribute classname is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="1" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1"><failure type="t">x</failure></testcase></testsuite></testsuites>`, "attribute message is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1" package="f"/></testsuite></testsuites>`, "attribute package is not allowed"},
		{`<testsuites><testsuite name="x" tests="1" failures="1" errors="1" skipped="0" time="0"><testcase name="a" classname="c" time="1"><failure message="m" type="t"/><error message="m" type="t"/></testcase></testsuite></testsuites>`, "<error> comes after"},
		{`<testsuites><testsuite name="x" tests="2" failures="0" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1"/></testsuite></testsuites>`, "tests=\"2\", but it holds 1"},
		{`<testsuites><testsuite name="x" tests="0" failures="0" errors="0" skipped="0" time="1s"/></testsuites>`, "not a decimal"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="1" time="0"><testcase name="a" classname="c" time="1"><skipped message="m"/></testcase></testsuite></testsuites>`, "attribute message is not allowed"},
	} {
		err := Check([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}
