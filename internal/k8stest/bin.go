package k8stest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The versions .ci/k8s builds; the cache directory is named by them
// (TestBuildScriptVersions checks that the script says the same).
const (
	KubernetesVersion = "v1.37.2"
	KwokVersion       = "v0.8.0"
	EtcdVersion       = "v3.7.0"
	// recipe is .ci/k8s's RECIPE: bumped when the script builds
	// something else under the same versions.
	recipe = 1
)

// binaries are the programs Bin's directory holds.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// stageFiles are the kwok stages a cluster runs, relative to Bin's
// kwok-stages directory (kwok's kustomize/stage). There is no
// pod-complete stage: a pod stays Running until FinishPod or FailPod.
var stageFiles = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat/node-heartbeat.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-delete.yaml",
}

// CacheDir is the directory .ci/k8s builds into: $GPUATTEST_TEST_CACHE
// (default /var/cache/gpuattest-test) and a name made of the versions.
func CacheDir() string {
	cache := os.Getenv("GPUATTEST_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/gpuattest-test"
	}
	return filepath.Join(cache, fmt.Sprintf("k8s-%s-kwok-%s-etcd-%s-r%d", KubernetesVersion, KwokVersion, EtcdVersion, recipe))
}

// Bin is where .ci/k8s put the binaries (kube-apiserver,
// kube-controller-manager, kube-scheduler, etcd, kwok) and kwok's stage
// files: $GPUATTEST_K8S_BIN when set, else CacheDir. The error names
// what is missing and says how to build it.
func Bin() (dir string, err error) {
	dir = os.Getenv("GPUATTEST_K8S_BIN")
	if dir == "" {
		dir = CacheDir()
	}
	var missing []error
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, fmt.Errorf("%s: no executable %s", dir, b))
		}
	}
	for _, s := range stageFiles {
		if _, err := os.Stat(filepath.Join(dir, "kwok-stages", s)); err != nil {
			missing = append(missing, fmt.Errorf("%s: no kwok stage file kwok-stages/%s", dir, s))
		}
	}
	if len(missing) > 0 {
		return dir, fmt.Errorf("%w\nhint: bash .ci/k8s builds them (14-18 minutes cold, on 2 cores), or set GPUATTEST_K8S_BIN", errors.Join(missing...))
	}
	return dir, nil
}
