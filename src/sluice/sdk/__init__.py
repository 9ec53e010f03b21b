"""The authoring API: @task, @workflow, LaunchPlan, Cache and friends, turned into specs."""
