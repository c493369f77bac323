package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// csrf issues and checks the dashboard's form tokens: an expiry signed with
// a per-process key, so no server-side session is needed.
type csrf struct{ key []byte }

func newCSRF(key []byte) *csrf {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	return &csrf{key: key}
}

func (c *csrf) sign(msg string) string {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Token returns a token valid for 12 hours.
func (c *csrf) Token() string {
	exp := strconv.FormatInt(time.Now().Add(12*time.Hour).Unix(), 10)
	return exp + "." + c.sign(exp)
}

// Valid checks a token's signature and expiry.
func (c *csrf) Valid(tok string) bool {
	exp, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	if !hmac.Equal([]byte(sig), []byte(c.sign(exp))) {
		return false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && time.Now().Unix() < n
}
