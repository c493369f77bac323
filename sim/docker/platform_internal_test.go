package docker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/containerd/platforms"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/normsim/normsim/sim"
)

// Engine 20.10 here keeps one platform per image name; an engine with
// containerd's image store keeps several under one name (a manifest
// list), and a platform: was judged by the inspect's one platform only.
// These cases are faked: the inspect answers an engine gives.

func manifest(p string, available bool) image.ManifestSummary {
	plat, err := platforms.Parse(p)
	if err != nil {
		panic(err)
	}
	return image.ManifestSummary{ID: "sha256:" + p, Kind: image.ManifestKindImage, Available: available, ImageData: &image.ImageProperties{Platform: plat}}
}

func attestation() image.ManifestSummary {
	return image.ManifestSummary{ID: "sha256:att", Kind: image.ManifestKindAttestation, Available: true}
}

func inspect(os, arch, variant string, manifests ...image.ManifestSummary) image.InspectResponse {
	return image.InspectResponse{ID: "sha256:img", Os: os, Architecture: arch, Variant: variant, Manifests: manifests}
}

func TestImagePlatformsOf(t *testing.T) {
	multiStore := inspect("linux", "amd64", "")
	multiStore.Descriptor = &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex}
	lone := inspect("linux", "arm64", "v8", image.ManifestSummary{ID: "sha256:x", Kind: image.ManifestKindImage, Available: true})
	twoUnnamed := inspect("linux", "amd64", "",
		image.ManifestSummary{ID: "sha256:x", Kind: image.ManifestKindImage, Available: true},
		image.ManifestSummary{ID: "sha256:y", Kind: image.ManifestKindImage, Available: true})
	for _, tc := range []struct {
		name   string
		info   image.InspectResponse
		have   string // platforms.Format of each, joined by a blank
		listed string
		known  bool
	}{
		{"classic store: the inspect's platform", inspect("linux", "amd64", ""), "linux/amd64", "", true},
		{"several platforms, an attestation", inspect("linux", "amd64", "", manifest("linux/amd64", true), manifest("linux/arm64/v8", true), attestation()), "linux/amd64 linux/arm64/v8", "", true},
		{"one pulled, one only listed", inspect("linux", "amd64", "", manifest("linux/amd64", true), manifest("linux/arm/v7", false)), "linux/amd64", "linux/arm/v7", true},
		{"a lone manifest without its platform: the inspect's", lone, "linux/arm64/v8", "", true},
		{"several manifests without their platform: cannot tell", twoUnnamed, "", "", false},
		{"a store of several platforms not listed (API before 1.48): cannot tell", multiStore, "linux/amd64", "", false},
		{"no platform at all: cannot tell", inspect("", "", ""), "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := imagePlatformsOf(tc.info)
			format := func(ps []platforms.Platform) string {
				s := make([]string, len(ps))
				for i, p := range ps {
					s[i] = platforms.Format(p)
				}
				return strings.Join(s, " ")
			}
			if got := format(ip.have); got != tc.have {
				t.Errorf("have %q, want %q", got, tc.have)
			}
			if got := format(ip.listed); got != tc.listed {
				t.Errorf("listed %q, want %q", got, tc.listed)
			}
			if ip.known != tc.known {
				t.Errorf("known %v, want %v", ip.known, tc.known)
			}
		})
	}
}

func TestPlatformProblem(t *testing.T) {
	amd := platforms.Platform{OS: "linux", Architecture: "amd64"}
	arm := platforms.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	armv7 := platforms.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
	for _, tc := range []struct {
		name, platform string
		ip             imagePlatforms
		code           string   // "" for none
		says           []string // in the error
	}{
		{"one of several", "linux/arm64", imagePlatforms{have: []platforms.Platform{amd, arm}, known: true}, "", nil},
		{"an alias", "linux/aarch64", imagePlatforms{have: []platforms.Platform{amd, arm}, known: true}, "", nil},
		{"none of several", "linux/arm/v7", imagePlatforms{have: []platforms.Platform{amd, arm}, known: true}, sim.EImageMissing,
			[]string{`services.app.platform: "linux/arm/v7"`, "is for linux/amd64, linux/arm64/v8", "never pulls", "remove platform", "docker build --platform linux/arm/v7"}},
		{"listed, not pulled", "linux/arm/v7", imagePlatforms{have: []platforms.Platform{amd}, listed: []platforms.Platform{armv7}, known: true}, sim.EImageMissing,
			[]string{"is for linux/amd64 (its index lists linux/arm/v7, but that platform's content is not in the engine)"}},
		{"the engine cannot tell: no claim", "linux/arm/v7", imagePlatforms{have: []platforms.Platform{amd}}, "", nil},
		{"not a platform", "linux-amd64", imagePlatforms{have: []platforms.Platform{amd}, known: true}, sim.EComposeInvalid,
			[]string{`services.app.platform: "linux-amd64" is not a platform`, "such as linux/amd64", "remove platform"}},
		{"not a platform, whatever the engine holds", "*", imagePlatforms{}, sim.EComposeInvalid, []string{`"*" is not a platform`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := platformProblem("app", tc.platform, "img:1", tc.ip)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if got := sim.ErrorCode(err); got != tc.code {
				t.Fatalf("code %s (%v), want %s", got, err, tc.code)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
		})
	}
}

// imageEngine answers ping and image inspects at api, holding one image
// for linux/amd64 and linux/arm64 (listed only where the API has them).
type imageEngine struct {
	api       string
	mu        sync.Mutex
	manifests []string // each inspect's manifests query
}

func (e *imageEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Api-Version", e.api)
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.Path
	if i := strings.Index(path[1:], "/"); strings.HasPrefix(path, "/v1.") && i > 0 {
		path = path[i+1:]
	}
	switch {
	case path == "/_ping":
		fmt.Fprint(w, "OK")
	case path == "/images/multi:1/json":
		e.mu.Lock()
		e.manifests = append(e.manifests, r.URL.Query().Get("manifests"))
		e.mu.Unlock()
		info := inspect("linux", "amd64", "")
		info.Descriptor = &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex}
		if r.URL.Query().Get("manifests") == "1" {
			info.Manifests = []image.ManifestSummary{manifest("linux/amd64", true), manifest("linux/arm64", true), attestation()}
		}
		json.NewEncoder(w).Encode(info)
	case path == "/images/single:1/json":
		json.NewEncoder(w).Encode(inspect("linux", "amd64", ""))
	default:
		http.Error(w, `{"message":"No such image"}`, http.StatusNotFound)
	}
}

func fakeImageRuntime(t *testing.T, api string) (*Runtime, *imageEngine) {
	t.Helper()
	e := &imageEngine{api: api}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	r := &Runtime{cli: cli}
	if err := r.connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r, e
}

func platformProject(img, platform string) *types.Project {
	s := types.ServiceConfig{Name: "app"}
	s.Image, s.Platform = img, platform
	return &types.Project{Name: "p", Services: types.Services{"app": s}}
}

// An engine that lists an image's platforms (API 1.48 and later) is
// asked for them, and a platform among them runs; an older one is asked
// as before, and an image store that may hold more than the inspect says
// is not called missing a platform.
func TestCheckImagesJudgesEveryPlatformTheEngineHolds(t *testing.T) {
	r, e := fakeImageRuntime(t, "1.48")
	if err := r.checkImages(t.Context(), platformProject("multi:1", "linux/arm64")); err != nil {
		t.Errorf("linux/arm64, which the engine holds: %v", err)
	}
	err := r.checkImages(t.Context(), platformProject("multi:1", "linux/ppc64le"))
	if sim.ErrorCode(err) != sim.EImageMissing || !strings.Contains(err.Error(), "is for linux/amd64, linux/arm64") {
		t.Errorf("linux/ppc64le: %v, want IMAGE_MISSING naming both platforms held", err)
	}
	if strings.Join(e.manifests, ",") != "1,1" {
		t.Errorf("manifests asked %q, want each inspect to ask", e.manifests)
	}

	r, e = fakeImageRuntime(t, "1.41")
	if err := r.checkImages(t.Context(), platformProject("multi:1", "linux/arm64")); err != nil {
		t.Errorf("API 1.41, a store of several platforms: %v, want no claim", err)
	}
	if strings.Join(e.manifests, ",") != "" {
		t.Errorf("API 1.41: manifests asked %q, which it does not know", e.manifests)
	}
	err = r.checkImages(t.Context(), platformProject("single:1", "linux/arm64"))
	if sim.ErrorCode(err) != sim.EImageMissing || !strings.Contains(err.Error(), "is for linux/amd64") {
		t.Errorf("the classic store's one platform: %v, want IMAGE_MISSING", err)
	}
	err = r.checkImages(t.Context(), platformProject("single:1", "linux-arm64"))
	if sim.ErrorCode(err) != sim.EComposeInvalid || !strings.Contains(err.Error(), `services.app.platform: "linux-arm64" is not a platform`) {
		t.Errorf("linux-arm64: %v, want COMPOSE_INVALID naming the key", err)
	}
	err = r.checkImages(t.Context(), platformProject("absent:1", "linux-arm64"))
	if sim.ErrorCode(err) != sim.EComposeInvalid {
		t.Errorf("linux-arm64 on an absent image: %v, want COMPOSE_INVALID before the image is looked at", err)
	}
}
