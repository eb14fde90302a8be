package charttest

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// objects is one render decoded into the API types of its kinds.
type objects struct {
	configMaps      map[string]*corev1.ConfigMap
	services        map[string]*corev1.Service
	serviceAccounts map[string]*corev1.ServiceAccount
	daemonSets      map[string]*appsv1.DaemonSet
	statefulSets    map[string]*appsv1.StatefulSet
	pdbs            map[string]*policyv1.PodDisruptionBudget
	roles           map[string]*rbacv1.Role
	roleBindings    map[string]*rbacv1.RoleBinding
}

// decode decodes every document strictly: a field its API type does not have
// (names are case-sensitive), or a key given twice, fails; so does a kind the chart is not known to make.
func decode(t *testing.T, manifest string) *objects {
	t.Helper()
	objs := &objects{
		configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		serviceAccounts: map[string]*corev1.ServiceAccount{}, daemonSets: map[string]*appsv1.DaemonSet{},
		statefulSets: map[string]*appsv1.StatefulSet{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		roles: map[string]*rbacv1.Role{}, roleBindings: map[string]*rbacv1.RoleBinding{},
	}
	for _, doc := range manifests(manifest) {
		var typeMeta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &typeMeta); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		gvk := typeMeta.APIVersion + "/" + typeMeta.Kind
		var obj metav1.Object
		switch gvk {
		case "v1/ConfigMap":
			obj = strictInto(t, doc, objs.configMaps)
		case "v1/Service":
			obj = strictInto(t, doc, objs.services)
		case "v1/ServiceAccount":
			obj = strictInto(t, doc, objs.serviceAccounts)
		case "apps/v1/DaemonSet":
			obj = strictInto(t, doc, objs.daemonSets)
		case "apps/v1/StatefulSet":
			obj = strictInto(t, doc, objs.statefulSets)
		case "policy/v1/PodDisruptionBudget":
			obj = strictInto(t, doc, objs.pdbs)
		case "rbac.authorization.k8s.io/v1/Role":
			obj = strictInto(t, doc, objs.roles)
		case "rbac.authorization.k8s.io/v1/RoleBinding":
			obj = strictInto(t, doc, objs.roleBindings)
		default:
			t.Fatalf("the chart rendered a %s, which this test does not know: add its API type\n%s", gvk, doc)
		}
		checkMeta(t, gvk, obj)
	}
	return objs
}

func strictInto[T any, P interface {
	*T
	metav1.Object
}](t *testing.T, doc string, into map[string]P) P {
	t.Helper()
	obj := P(new(T))
	data, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	// Case-sensitive, as the API server decodes (encoding/json would take hostPid for hostPID).
	strictErrs, err := kjson.UnmarshalStrict(data, obj)
	if err = errors.Join(append(strictErrs, err)...); err != nil {
		t.Fatalf("does not decode strictly into %T: %v\n%s", obj, err, doc)
	}
	if _, dup := into[obj.GetName()]; dup {
		t.Fatalf("two %T named %s", obj, obj.GetName())
	}
	into[obj.GetName()] = obj
	return obj
}

// checkMeta applies the API server's rules for names and labels.
func checkMeta(t *testing.T, gvk string, obj metav1.Object) {
	t.Helper()
	where := gvk + " " + obj.GetName()
	for _, msg := range validation.IsDNS1123Subdomain(obj.GetName()) {
		t.Errorf("%s: name: %s", where, msg)
	}
	if strings.Contains(gvk, "Service") && !strings.Contains(gvk, "ServiceAccount") {
		for _, msg := range validation.IsDNS1035Label(obj.GetName()) {
			t.Errorf("%s: a Service name must be a DNS-1035 label: %s", where, msg)
		}
	}
	if obj.GetNamespace() != namespace {
		t.Errorf("%s: namespace %q, want the release's %q", where, obj.GetNamespace(), namespace)
	}
	checkLabels(t, where, obj.GetLabels())
}

func checkLabels(t *testing.T, where string, set map[string]string) {
	t.Helper()
	for key, value := range set {
		for _, msg := range validation.IsQualifiedName(key) {
			t.Errorf("%s: label key %q: %s", where, key, msg)
		}
		for _, msg := range validation.IsValidLabelValue(value) {
			t.Errorf("%s: label %s=%q: %s", where, key, value, msg)
		}
	}
}

// workload is the pod template of a DaemonSet or StatefulSet, with the
// volume claims the StatefulSet adds.
type workload struct {
	kind, name string
	selector   *metav1.LabelSelector
	pod        corev1.PodTemplateSpec
	claims     []corev1.PersistentVolumeClaim
}

func (o *objects) workloads() []workload {
	var all []workload
	for name, ds := range o.daemonSets {
		all = append(all, workload{kind: "DaemonSet", name: name, selector: ds.Spec.Selector, pod: ds.Spec.Template})
	}
	for name, sts := range o.statefulSets {
		all = append(all, workload{kind: "StatefulSet", name: name, selector: sts.Spec.Selector, pod: sts.Spec.Template, claims: sts.Spec.VolumeClaimTemplates})
	}
	return all
}

// configOf returns the collector config a workload's container runs: the
// file named by --config, found through the volume mounted there.
func (o *objects) configOf(w workload) (string, error) {
	if len(w.pod.Spec.Containers) != 1 {
		return "", fmt.Errorf("%s %s has %d containers, want the collector alone", w.kind, w.name, len(w.pod.Spec.Containers))
	}
	c := w.pod.Spec.Containers[0]
	var file string
	for _, arg := range c.Args {
		if value, ok := strings.CutPrefix(arg, "--config="); ok {
			file = value
		}
	}
	if file == "" {
		return "", fmt.Errorf("%s %s: no --config=<file> argument in %v", w.kind, w.name, c.Args)
	}
	for _, mount := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, mount.MountPath+"/")
		if !ok {
			continue
		}
		for _, vol := range w.pod.Spec.Volumes {
			if vol.Name != mount.Name || vol.ConfigMap == nil {
				continue
			}
			cm, ok := o.configMaps[vol.ConfigMap.Name]
			if !ok {
				return "", fmt.Errorf("%s %s mounts ConfigMap %s, which the chart does not render", w.kind, w.name, vol.ConfigMap.Name)
			}
			key := rel
			for _, item := range vol.ConfigMap.Items {
				if item.Path == rel {
					key = item.Key
				}
			}
			data, ok := cm.Data[key]
			if !ok {
				return "", fmt.Errorf("%s %s: ConfigMap %s has no key %s for %s", w.kind, w.name, cm.Name, key, file)
			}
			return data, nil
		}
	}
	return "", fmt.Errorf("%s %s: no ConfigMap volume is mounted where --config=%s points", w.kind, w.name, file)
}

// TestManifestsDecodeStrictlyAndFitTogether checks every render for what the
// API server would reject or what would leave a pod unable to start: unknown
// fields, bad names and labels, selectors that miss their pods, Services whose
// target ports no container has, mounts without a volume or nested in one, and
// references to ConfigMaps, service accounts and Roles the chart does not make.
func TestManifestsDecodeStrictlyAndFitTogether(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			manifest, err := render(sc.valuesFiles...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, manifest)
			if len(objs.workloads()) == 0 {
				t.Fatal("no DaemonSet or StatefulSet rendered")
			}
			for _, w := range objs.workloads() {
				checkWorkload(t, objs, w)
			}
			for name, svc := range objs.services {
				checkServiceSelectsAPod(t, objs, name, svc)
			}
			for name, pdb := range objs.pdbs {
				if !selectsSomeWorkload(objs, pdb.Spec.Selector) {
					t.Errorf("PodDisruptionBudget %s selects no workload's pods", name)
				}
			}
			for name, binding := range objs.roleBindings {
				if _, ok := objs.roles[binding.RoleRef.Name]; !ok || binding.RoleRef.Kind != "Role" {
					t.Errorf("RoleBinding %s binds %s %s, which the chart does not render", name, binding.RoleRef.Kind, binding.RoleRef.Name)
				}
				for _, subject := range binding.Subjects {
					if _, ok := objs.serviceAccounts[subject.Name]; !ok {
						t.Errorf("RoleBinding %s binds ServiceAccount %s, which the chart does not render", name, subject.Name)
					}
				}
			}
		})
	}
}

func checkWorkload(t *testing.T, objs *objects, w workload) {
	t.Helper()
	where := w.kind + " " + w.name
	selector, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil {
		t.Fatalf("%s: selector: %v", where, err)
	}
	if !selector.Matches(labels.Set(w.pod.Labels)) {
		t.Errorf("%s: its selector %s does not match its pod labels %v", where, selector, w.pod.Labels)
	}
	checkLabels(t, where+" pod", w.pod.Labels)
	spec := w.pod.Spec
	if _, ok := objs.serviceAccounts[spec.ServiceAccountName]; !ok {
		t.Errorf("%s runs as ServiceAccount %q, which the chart does not render", where, spec.ServiceAccountName)
	}
	volumes := map[string]corev1.Volume{}
	for _, vol := range spec.Volumes {
		volumes[vol.Name] = vol
		if vol.ConfigMap != nil {
			if _, ok := objs.configMaps[vol.ConfigMap.Name]; !ok {
				t.Errorf("%s: volume %s: ConfigMap %s is not rendered", where, vol.Name, vol.ConfigMap.Name)
			}
		}
	}
	for _, claim := range w.claims {
		volumes[claim.Name] = corev1.Volume{Name: claim.Name}
	}
	for _, c := range spec.Containers {
		if c.Image == "" || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: container %s needs an image and a memory limit (memory_limiter works from it)", where, c.Name)
		}
		mounted := map[string]bool{}
		for _, mount := range c.VolumeMounts {
			if _, ok := volumes[mount.Name]; !ok {
				t.Errorf("%s: container %s mounts %s, which is no volume of the pod", where, c.Name, mount.Name)
			}
			for other := range mounted {
				if strings.HasPrefix(mount.MountPath, other+"/") || strings.HasPrefix(other, mount.MountPath+"/") {
					t.Errorf("%s: mounts %s and %s nest (a read-only volume cannot hold a mount point)", where, other, mount.MountPath)
				}
			}
			mounted[path.Clean(mount.MountPath)] = true
		}
		for _, port := range c.Ports {
			for _, msg := range validation.IsValidPortName(port.Name) {
				t.Errorf("%s: port %s: %s", where, port.Name, msg)
			}
		}
	}
	if _, err := objs.configOf(w); err != nil {
		t.Error(err)
	}
}

func checkServiceSelectsAPod(t *testing.T, objs *objects, name string, svc *corev1.Service) {
	t.Helper()
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	for _, w := range objs.workloads() {
		if !selector.Matches(labels.Set(w.pod.Labels)) {
			continue
		}
		ports := map[string]bool{}
		for _, p := range w.pod.Spec.Containers[0].Ports {
			ports[p.Name] = true
		}
		for _, sp := range svc.Spec.Ports {
			if !ports[sp.TargetPort.String()] {
				t.Errorf("Service %s port %s targets %s, which %s %s's container does not name", name, sp.Name, sp.TargetPort.String(), w.kind, w.name)
			}
		}
		return
	}
	t.Errorf("Service %s selects no workload's pods (selector %v)", name, svc.Spec.Selector)
}

func selectsSomeWorkload(objs *objects, ls *metav1.LabelSelector) bool {
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return false
	}
	for _, w := range objs.workloads() {
		if selector.Matches(labels.Set(w.pod.Labels)) {
			return true
		}
	}
	return false
}
