"""Drive the generated Pulumi projects with the Automation API (local programs, not inline).

``pulumi.automation`` runs the ``pulumi`` CLI underneath; the CLI, the passphrase of the file
backend and the cloud's credentials are checked before anything starts, each with the command
that fixes it (exit 4). Secrets go in with ``config set --secret KEY`` from the environment
(``VLLM_API_KEY``, optional ``HF_TOKEN``), the value on stdin (never on a command line), and are
encrypted in the stack config by the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from hetinfra.compile.pulumi_project import backend_url
from hetinfra.errors import InvalidInputError, ProviderError
from hetinfra.facts import key_problem
from hetinfra.fileio import json_value

INSTALL_HINT = "install the Pulumi CLI: curl -fsSL https://get.pulumi.com | sh  (or: brew install pulumi)"


def pulumi_command():
    """The ``pulumi`` CLI as the Automation API's PulumiCommand; exit 4 when it is missing."""
    try:
        from pulumi import automation as auto
    except ImportError:
        raise ProviderError("the Pulumi SDK is not installed", hint="pip install 'hetinfra[pulumi]'") from None
    if shutil.which("pulumi") is None:
        raise ProviderError("the pulumi command is not on PATH", hint=INSTALL_HINT)
    try:
        return auto.PulumiCommand(skip_version_check=True)
    except Exception as exc:  # the CLI exists but `pulumi version` fails (OSError, CalledProcessError)
        raise ProviderError(f"`pulumi version` failed: {exc}", hint=INSTALL_HINT) from None


def _home() -> Path:
    from hetinfra.envpaths import home_dir

    return home_dir()


def credentials_problem(cloud: str, env: dict | None = None) -> str | None:
    """Why the cloud's SDK would find no credentials here, or None (a presence check: the
    provider validates them for real at ``pulumi up``)."""
    env = os.environ if env is None else env
    home = _home()
    if cloud == "aws":
        if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE") \
                or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or (home / ".aws" / "credentials").exists() \
                or (home / ".aws" / "config").exists():
            return None
        return "no AWS credentials: run `aws configure` (or `aws sso login`), or set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
    if cloud == "gcp":
        if env.get("GOOGLE_APPLICATION_CREDENTIALS") or env.get("GOOGLE_CREDENTIALS") \
                or (home / ".config" / "gcloud" / "application_default_credentials.json").exists():
            return None
        return "no GCP credentials: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS"
    if cloud == "azure":
        if (env.get("ARM_CLIENT_ID") or env.get("AZURE_CLIENT_ID") or env.get("ARM_USE_MSI")
                or (home / ".azure" / "azureProfile.json").exists()):
            return None
        return "no Azure credentials: run `az login`, or set ARM_CLIENT_ID/ARM_CLIENT_SECRET/ARM_TENANT_ID"
    return f"no Pulumi program for cloud {cloud}"


def check_ready(clouds: list[str], backend_urls: dict[str, str], env: dict | None = None) -> None:
    """Everything ``up``/``destroy`` needs, checked up front so nothing starts half-way."""
    env = os.environ if env is None else env
    for cloud in clouds:
        check_passphrase([cloud], backend_urls, env)
        check_credentials(cloud, env)


def check_passphrase(clouds: list[str], backend_urls: dict[str, str], env: dict) -> None:
    """A file:// backend needs PULUMI_CONFIG_PASSPHRASE(_FILE) (exit 4)."""
    if any(backend_urls.get(c, "").startswith("file://") for c in clouds) and not (
            env.get("PULUMI_CONFIG_PASSPHRASE") is not None or env.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
        raise ProviderError("the file:// Pulumi backend encrypts secrets with a passphrase and none is set",
                            hint="export PULUMI_CONFIG_PASSPHRASE=... (keep it: `pulumi destroy` needs it too)")


def check_credentials(cloud: str, env: dict) -> None:
    """The cloud's SDK would find credentials (exit 4 naming the login command otherwise)."""
    why = credentials_problem(cloud, env)
    if why:
        raise ProviderError(f"{cloud}: {why}")


def backend_urls(plan: dict | None, clouds: list[str]) -> dict[str, str]:
    """Each cloud's Pulumi backend: the plan's deploy.backend_url, else the project's file backend."""
    url = ((plan or {}).get("deploy") or {}).get("backend_url")
    return {c: url or "file://" for c in clouds}


def secrets_from_env(env: dict | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    key = env.get("VLLM_API_KEY")
    if not key:
        raise InvalidInputError("VLLM_API_KEY is not set: the endpoints are served behind an API key",
                                hint="export VLLM_API_KEY=$(openssl rand -hex 24)  (clients send it as a Bearer token)")
    why = key_problem(key)
    if why:  # the VMs' env file dropped a key with a newline, and vLLM served without one
        raise InvalidInputError(f"VLLM_API_KEY {why}: clients send it as a Bearer token, and the VMs read it "
                                "from an env file", hint="export VLLM_API_KEY=$(openssl rand -hex 24)")
    out = {"hetinfra:apiKey": key}
    if env.get("HF_TOKEN"):
        why = key_problem(env["HF_TOKEN"])
        if why:  # dropped from the env file the same way: a gated model's download failed on the VM
            raise InvalidInputError(f"HF_TOKEN {why.replace('key', 'token')}", hint="export HF_TOKEN=hf_... as the "
                                    "Hugging Face settings page shows it")
        out["hetinfra:hfToken"] = env["HF_TOKEN"]
    return out


def project_env(project_dir: Path, plan: dict | None = None) -> dict[str, str]:
    """The environment a project's ``pulumi`` runs with: ``PULUMI_BACKEND_URL`` (the plan's
    ``deploy.backend_url``, else ``file://<project_dir>/state`` where the folder is now, whatever the
    working directory or an exported ``PULUMI_BACKEND_URL``), and ``PULUMI_PYTHON_CMD`` (this
    interpreter, which imports ``hetinfra.stacks``; Pulumi.yaml names no virtualenv). Without
    ``plan``, the project's own plan.json is read."""
    if plan is None:
        from hetinfra.document import load_plan
        from hetinfra.errors import InvalidInputError

        try:
            plan = load_plan(Path(project_dir) / "plan.json", cloud_copy=True).to_dict()  # the cloud's copy
        except InvalidInputError:  # no or no valid plan there: the default backend
            plan = None
    return {"PULUMI_BACKEND_URL": backend_url(plan if isinstance(plan, dict) else None, project_dir),
            "PULUMI_PYTHON_CMD": sys.executable}


class PulumiProject:
    """One generated project folder (``OUT/pulumi/<cloud>``) and its stack."""

    def __init__(self, project_dir: Path, stack: str, command, on_output: Callable[[str], None] = print,
                 plan: dict | None = None):
        self.dir = project_dir
        self.stack_name = stack
        self.command = command
        self.on_output = on_output
        self.env = project_env(project_dir, plan)

    def _stack(self):
        """The stack, selected once per project object (each selection runs the CLI)."""
        from pulumi import automation as auto

        if getattr(self, "_selected", None) is None:
            opts = auto.LocalWorkspaceOptions(pulumi_command=self.command, work_dir=str(self.dir),
                                              env_vars=self.env)
            self._selected = auto.create_or_select_stack(stack_name=self.stack_name, work_dir=str(self.dir), opts=opts)
        return self._selected

    def up(self, secrets: dict[str, str], images: dict | None = None) -> dict:
        """``pulumi up --refresh`` with the secrets and, given ``images``, the pinned images set (see
        :meth:`configure`); returns the stack outputs as plain values."""
        stack = self._stack()
        self.configure(secrets, images)
        # refresh first: a preempted VM the cloud deleted leaves the state, so `up` recreates it
        result = stack.up(on_output=self.on_output, color="never", refresh=True)
        return {k: v.value for k, v in result.outputs.items()}

    def _cli(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        """Run this project's ``pulumi`` (the Automation API's command, environment and folder) with
        ``stdin``, which the Automation API's runner cannot feed."""
        exe = self.command.command
        env = {**os.environ, **self.env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(exe):  # as the Automation API does: plugins bundled beside the binary come first
            env["PATH"] = os.pathsep.join([os.path.dirname(exe), env.get("PATH", "")])
        return subprocess.run([exe, "--non-interactive", *args], input=stdin, capture_output=True, text=True,
                              cwd=self.dir, env=env)

    def set_secrets(self, secrets: dict[str, str]) -> None:
        """``pulumi config set --secret KEY`` per secret with the value on stdin, never on a command
        line (``config set-all --secret K=V``, the Automation API's way, shows it in ``ps``). The CLI
        strips one trailing newline from stdin, hence the one added."""
        for key in sorted(secrets):
            done = self._cli(["config", "set", "--secret", "--stack", self.stack_name, key], stdin=secrets[key] + "\n")
            if done.returncode != 0:
                why = " | ".join(ln for ln in done.stderr.strip().splitlines()[-2:]) or f"exit status {done.returncode}"
                raise ProviderError(f"pulumi config set --secret {key} failed in {self.dir}: {why}")

    def configure(self, secrets: dict[str, str], images: dict | None = None) -> None:
        """Set the secrets (on stdin, :meth:`set_secrets`) and, given ``images``, the stack config
        ``hetinfra:images`` (the pinned image ids: hetinfra.compile.images; ``{}``: no pin, the
        program takes the newest)."""
        from pulumi import automation as auto

        from hetinfra.compile.images import CONFIG_KEY

        self.set_secrets(secrets)
        if images is not None:
            self._stack().set_config(CONFIG_KEY, auto.ConfigValue(json.dumps(images, sort_keys=True)))

    def preview(self, secrets: dict[str, str], images: dict | None = None) -> dict:
        """``pulumi preview --json`` with the secrets and pinned images set as ``up`` will have them
        (a new stack is created, empty): the parsed document; a failed preview raises ProviderError
        (exit 4) and changes no resource."""
        from hetinfra.deploy.preview import preview_failure

        self._stack()
        self.configure(secrets, images)
        done = self._cli(["preview", "--json", "--stack", self.stack_name])
        if done.returncode != 0:
            raise preview_failure(self.dir.name, done.returncode, done.stdout, done.stderr)
        try:
            return json_value(done.stdout)
        except ValueError as exc:
            raise ProviderError(f"pulumi preview --json in {self.dir} printed no JSON ({exc})") from None

    def destroy(self) -> None:
        self._stack().destroy(on_output=self.on_output, color="never")

    def outputs(self) -> dict:
        return {k: v.value for k, v in self._stack().outputs().items()}

    def refresh(self) -> None:
        """``pulumi refresh``: adopt what the cloud has now into the stack's state (a deleted VM
        leaves the state, a group resized outside Pulumi shows its new size)."""
        self._stack().refresh(on_output=self.on_output, color="never")

    def resources(self) -> list[dict]:
        """The stack's resources as recorded in its state (``pulumi stack export``): each with its
        ``urn``, ``type`` and ``outputs``."""
        deployment = self._stack().export_stack().deployment or {}
        return list(deployment.get("resources") or [])
