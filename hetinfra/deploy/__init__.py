"""Deploy a plan: Pulumi Automation API and SkyPilot SDK drivers, deployed state."""
