package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestAnswersAreWholeAndIndented: every answer is the value's indented
// JSON with its length, whatever the pooled encoder wrote before it, a
// large one included.
func TestAnswersAreWholeAndIndented(t *testing.T) {
	values := []any{
		map[string]any{"a": 1, "b": []string{"x", "y"}},
		[]int{1},
		map[string]string{"big": strings.Repeat("z", 2*maxPooledJSON)},
		"short",
		map[string]any{"a": 2},
	}
	for i, v := range values {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusCreated, v)
		want, _ := json.MarshalIndent(v, "", "  ")
		want = append(want, '\n')
		if rec.Code != http.StatusCreated || rec.Body.String() != string(want) {
			t.Fatalf("answer %d: %d %q, want 201 %q", i, rec.Code, rec.Body.String(), want)
		}
		if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(want)) {
			t.Errorf("answer %d: Content-Length %s, want %d", i, got, len(want))
		}
	}
}

// TestAnAnswerThatCannotEncodeIsAnError: a value JSON cannot hold is a
// 500 that says so, not half an answer.
func TestAnAnswerThatCannotEncodeIsAnError(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"f": func() {}})
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "encode the answer") {
		t.Fatalf("got %d %s, want 500 naming the encoding", rec.Code, rec.Body.String())
	}
}
