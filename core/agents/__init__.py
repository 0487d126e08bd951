"""Agents spoken to over ACP: the client session, the registry, the scripted agent."""
