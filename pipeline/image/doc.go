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
// A lock file looks like this (manifest_digest is what runs; index_digest
// is there when the reference named a multi-platform index):
//
//	{
//	  "apiVersion": "gpuattest.dev/v1",
//	  "kind": "Lock",
//	  "images": [
//	    {
//	      "name": "cuda",
//	      "reference": "nvidia/cuda:12.4.1-devel-ubuntu22.04",
//	      "index_digest": "sha256:...",
//	      "manifest_digest": "sha256:...",
//	      "config_digest": "sha256:...",
//	      "platform": "linux/amd64",
//	      "resolved_at": "2026-11-22T12:00:00Z"
//	    }
//	  ]
//	}
//
// A Pinner (NewPinner, WithLocked for release runs) turns each image of a
// pipeline into a Pinned: the source runners use, with its index, manifest
// and config digests and platform. The engine hands it to the step's runner
// and records it in run.json; attestations name it by URI, which never holds
// a local path. WriteDockerArchive streams a pinned image as an untagged
// docker archive, what the docker runner feeds `docker load` for images
// carried as files.
//
// Extract flattens an image into a digest-keyed cache directory, refusing
// every tar entry that could write outside it, and never leaves a
// half-extracted root file system under its final name. It reads each
// layer once, as stored: a goroutine decompresses it (gzip or zstd, with
// klauspost/compress) and hashes it ahead of the tar reader, and the
// digest is checked against the one the image config lists
// (go run ./bench/unpack compares it with tar -xzf).
package image
