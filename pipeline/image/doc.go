// Package image pins, pulls and safely extracts the container images that
// pipeline steps run in.
//
// An image source is one of:
//
//   - a registry reference (ubuntu:22.04, 127.0.0.1:5000/cuda@sha256:...),
//     authenticated from the docker keychain; registries on localhost and
//     127.0.0.1 are spoken to over plain HTTP;
//   - oci-layout:PATH[@sha256:...], an OCI image layout directory;
//   - docker-archive:PATH[@sha256:...], a `docker save` tarball.
//
// Resolve turns a source into digests (the index digest when the source is a
// multi-platform index, and the linux/amd64 manifest digest); Pull also
// returns the image. The lock file (gpuattest.lock, see Lock) records those
// digests beside the pipeline, and CheckLock is the release-mode gate that
// refuses floating tags, stale locks and digests a source no longer serves.
//
// Extract flattens an image into a digest-keyed cache directory, refusing
// every tar entry that could write outside it, and never leaves a
// half-extracted root file system under its final name.
package image

//go:generate go run ./internal/genschema ../../schemas/lock.schema.json
