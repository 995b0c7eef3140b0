package main

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// gitSyncImage is the start of the git-sync v4 image's reference.
const gitSyncImage = "registry.k8s.io/git-sync/git-sync:v4."

// gitSyncDefaultRoot is the image's --root (its GITSYNC_ROOT).
const gitSyncDefaultRoot = "/git"

// checkGitSync finds the git-sync sidecar of a pod and checks it publishes
// into a volume that conclave mounts too, and that conclave's templates.dir
// is the link git-sync swaps on each sync (or a folder under it): git-sync
// v4 checks each commit out into a new worktree and points --link at it,
// which conclave's poll of templates.dir follows. found is false when the
// pod has no git-sync container.
func checkGitSync(b *bundle, spec corev1.PodSpec) (found bool, problems []string) {
	bad := func(format string, args ...any) {
		problems = append(problems, "git-sync: "+fmt.Sprintf(format, args...))
	}
	gs, native := gitSyncContainer(spec)
	conclave := container(spec, conclaveContainer)
	if gs == nil || conclave == nil {
		return gs != nil, nil
	}
	if native {
		if gs.RestartPolicy == nil || *gs.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			bad("an init container that stops after its first sync; make it a sidecar (restartPolicy: Always)")
		}
		if gs.StartupProbe == nil {
			bad("needs a startup probe, or conclave starts before the first sync and finds no templates.dir")
		}
	}
	if gitSyncSetting(b, *gs, "repo", "") == "" {
		bad("no repository to sync (--repo or GITSYNC_REPO)")
	}
	if link, shared := gitSyncLink(b, gs, bad); shared != nil {
		checkGitSyncMount(spec, conclave, link, shared, bad)
	}
	return true, problems
}

// gitSyncContainer is the pod's git-sync container, the last one found, and
// whether it is an init container (a native sidecar); nil when it has none.
func gitSyncContainer(spec corev1.PodSpec) (gs *corev1.Container, native bool) {
	for i, c := range spec.InitContainers {
		if strings.HasPrefix(c.Image, gitSyncImage) {
			gs, native = &spec.InitContainers[i], true
		}
	}
	for i, c := range spec.Containers {
		if strings.HasPrefix(c.Image, gitSyncImage) {
			gs = &spec.Containers[i]
		}
	}
	return gs, native
}

// gitSyncLink is the absolute path of the link git-sync publishes and the
// writable volume mount of gs it lies in; shared is nil, and the reason
// reported, when there is no such link or volume.
func gitSyncLink(b *bundle, gs *corev1.Container, bad func(string, ...any)) (link string, shared *corev1.VolumeMount) {
	root := gitSyncSetting(b, *gs, "root", gitSyncDefaultRoot)
	link = gitSyncSetting(b, *gs, "link", "")
	if link == "" {
		bad("name the published link (--link or GITSYNC_LINK); conclave's templates.dir is that link")
		return "", nil
	}
	if !path.IsAbs(link) {
		link = path.Join(root, link)
	}
	for i, m := range gs.VolumeMounts {
		if hasPrefixPath(root, m.MountPath) {
			shared = &gs.VolumeMounts[i]
		}
	}
	if shared == nil || shared.ReadOnly {
		bad("its --root %s is not in a volume it can write", root)
		return "", nil
	}
	if !hasPrefixPath(link, shared.MountPath) {
		bad("the link %s is outside its volume %s (%s)", link, shared.Name, shared.MountPath)
		return "", nil
	}
	return link, shared
}

// checkGitSyncMount checks conclave mounts git-sync's volume shared
// read-only, its templates.dir is the link (or under it) as seen in that
// mount, and the volume is an emptyDir.
func checkGitSyncMount(spec corev1.PodSpec, conclave *corev1.Container, link string, shared *corev1.VolumeMount, bad func(string, ...any)) {
	var mounted *corev1.VolumeMount
	for i, m := range conclave.VolumeMounts {
		if m.Name == shared.Name && m.SubPath == "" {
			mounted = &conclave.VolumeMounts[i]
		}
	}
	if mounted == nil {
		bad("conclave does not mount git-sync's volume %s", shared.Name)
		return
	}
	if !mounted.ReadOnly {
		bad("conclave mounts git-sync's volume %s writable; make it readOnly", shared.Name)
	}
	want := path.Join(mounted.MountPath, strings.TrimPrefix(link, shared.MountPath))
	dir, ok := env(*conclave, "CONCLAVE_TEMPLATES_DIR")
	switch {
	case !ok:
		bad("conclave's templates.dir is not set (CONCLAVE_TEMPLATES_DIR=%s)", want)
	case !hasPrefixPath(path.Clean(dir), want):
		bad("conclave's templates.dir %s is not git-sync's link %s (in conclave's mount of volume %s)", dir, want, shared.Name)
	}
	for _, v := range spec.Volumes {
		if v.Name == shared.Name && v.EmptyDir == nil {
			bad("volume %s should be an emptyDir that git-sync fills", v.Name)
		}
	}
}

// gitSyncSetting is the value of one of git-sync's flags as the container
// sets it: a --flag=value argument, else its GITSYNC_ variable, literal or
// from a ConfigMap of the bundle (envFrom); def when neither is there.
func gitSyncSetting(b *bundle, c corev1.Container, flag, def string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v
		}
	}
	name := "GITSYNC_" + strings.ToUpper(flag)
	if v, ok := env(c, name); ok {
		return v
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && ef.Prefix == "" {
			if v, ok := b.configMaps[ef.ConfigMapRef.Name].Data[name]; ok {
				return v
			}
		}
	}
	return def
}
